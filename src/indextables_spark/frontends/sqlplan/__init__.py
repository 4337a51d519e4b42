"""SQL statements planned for the index (Spark-free analysis; spark/sql_routes.py runs the plan).

`operators.py` turns the reference's infix search operators into function calls sqlglot can parse;
`statement.py` finds the references to indextables tables in a parsed statement and plans it
(`plans.py`: what a plan holds), with the columns each reference needs (`columns_used.py`), the
search conditions it can take (`search_conditions.py`) and whether the statement is an aggregate
the index can answer (`aggregate_plan.py`: a request for core/split/aggregate/group_aggregate.py).
"""
