"""Makes the data source known to Spark, without `indextables_spark.register(spark)`, under the
reference's internal format name `io.indextables.spark.core.IndexTables4SparkTableProvider` (see
pyspark_indextables: Spark registers the `DefaultSource` of every top-level `pyspark_*` module)."""

from indextables_spark.spark.datasource import IndexTables4SparkTableProvider as DefaultSource

__all__ = ["DefaultSource"]
