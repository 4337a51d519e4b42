"""Makes the "indextables" data source known to Spark without `indextables_spark.register(spark)`.

Spark looks up Python data sources in top-level modules named `pyspark_*` that define
`DefaultSource` (pyspark's lookup_data_sources worker), on the driver of a classic session and on
a Spark Connect server alike, as long as this package is installed in the Python that Spark runs.
"""

from indextables_spark.spark.datasource import IndexTablesDataSource as DefaultSource

__all__ = ["DefaultSource"]
