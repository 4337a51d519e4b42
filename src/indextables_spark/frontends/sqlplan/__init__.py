"""SQL statements planned for the index (Spark-free analysis; spark/sql_routes.py runs the plan).

`operators.py` turns the reference's infix search operators into function calls sqlglot can parse;
`statement.py` finds the references to indextables tables in a parsed statement, the columns each
one needs, the search conditions it can take, and whether the statement is an aggregate the index
can answer (`aggregate.py` turns that into a request for core/split/group_aggregate.py).
"""
