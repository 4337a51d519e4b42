"""Makes the data source known to Spark, without `indextables_spark.register(spark)`, under the
reference's public format name `io.indextables.provider.IndexTablesProvider` (see pyspark_indextables:
Spark registers the `DefaultSource` of every top-level `pyspark_*` module, one name per module)."""

from indextables_spark.spark.datasource import IndexTablesProvider as DefaultSource

__all__ = ["DefaultSource"]
