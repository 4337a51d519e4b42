"""The two test tiers: `make test` runs the fast one, `make test-integration` the rest.

The fast tier is what a newcomer waits for (≤ 10 minutes on 2 cores): every Spark-free test and
the Spark tests of a classic local session, on local disk and on the S3 and Azure emulators. The
integration tier holds what needs other processes or long generated runs: a Spark Connect server,
a standalone cluster, the random differential suites, crash trials and load, and the other
Pythons (`make smoke`, which `make test-integration` runs after its pytest run).

A test is in the integration tier when it uses one of INTEGRATION_FIXTURES or its node id starts
with one of INTEGRATION_TESTS (a file, or a file and a test name); tests/conftest.py marks it
`integration`, and the two make targets select `-m integration` / `-m "not integration"`, so every
test is in exactly one tier (tests/test_tiers.py checks both selections against the whole suite).
"""

from __future__ import annotations

# servers of their own: each starts once per pytest process, and costs its start-up and its JVM
INTEGRATION_FIXTURES = frozenset({"spark_connect_server", "connect_spark", "standalone_cluster", "spark_cluster"})

# node id prefixes (relative to the repository root), each with why it is not in the fast tier
INTEGRATION_TESTS: dict[str, str] = {
    "tests/test_sql_differential.py": "hundreds of generated statements against Spark's own answers",
    "tests/test_sql_buckets.py::test_generated_statements_long": "80 generated bucket statements against "
    "Spark's own answers (the fast tier runs 6)",
    "tests/test_spark_correctness.py": "generated read sequences against Spark's own answers",
    "tests/test_reliability_crash_load.py": "crash trials in killed processes and concurrent load",
    "tests/test_relevance_corpus.py::test_spark": "every relevance case through Spark for four layouts",
    "tests/test_tiers.py": "collects the suite three times to check the tiers",
    "tests/test_vector_kinds.py::test_recall_per_kind_metric_and_filter_with_the_index_walked": "per kind, "
    "three indexes of 25,000 vectors searched 135 times against exact answers (15-30 s on a loaded 2-core machine)",
    "tests/test_docs_site.py": "builds the documentation site and opens every page in headless Chromium "
    "(the Debian package, which the fast tier does not need), from disk and served",
    "tests/test_packed_env.py": "builds a packed environment, starts a cluster and a Connect server of its own",
    "tests/test_spark_filters.py": "the filter matrix: every filter kind against Spark's own evaluation",
    "tests/test_aggregate.py::test_aggregations_equal_spark": "every aggregation kind against Spark's groupBy",
    "tests/test_companion.py::test_spark_differential": "companion reads against Spark on the source formats",
    "tests/test_cloud_concurrency.py": "racing committers on both object stores",
    "tests/test_reliability_storage_faults.py": "every storage fault × operation on both emulators: "
    "2 s stalls waited out to a timeout, the Azure SDK's own 1 s re-reads (~25 s of waiting alone)",
    "tests/test_reliability_commit_race.py": "8 writer processes racing appends on three stores while every core spins",
    "tests/test_state_pruning.py::test_partition_pruning_performance": "a million-entry state, timed",
    "tests/test_state_write.py::test_compaction_performance": "a 70k-entry state, timed",
    "tests/test_state_write.py::test_streaming_performance": "a 70k-entry state, timed",
    "tests/test_state_migration.py::test_upgrade_large_table": "a large table's state migrated",
    # Spark end to end a second time: the fast tier keeps a Spark test of each of these features
    # (a streaming source, a reference table's view, DELETE through SQL in the docs' pages), and their
    # Spark-free tests; these add more cases of each (≤ 10 minutes for the fast tier, issue #36)
    "tests/test_deletes_spark.py": "DELETE and Bloom filters through Spark, every route",
    "tests/test_reference_names.py::test_reference_format_names_read_write_stream_views": "the reference's "
    "format names on every Spark route",
    "tests/test_spark_other_formats.py::test_register_changes_nothing_for_other_formats": "five other formats "
    "written and read with and without register",
    "tests/test_reference_convert.py::test_spark_writers_refuse_and_sql_converts": "every Spark write route "
    "refused on a reference table, then CONVERT through SQL",
    "tests/test_reference_tables.py::test_spark_reads_every_reference_table": "the 17 reference tables read "
    "through Spark (the Spark-free reads of each stay in the fast tier)",
    "tests/test_relevance_corpus.py::test_OLD_BEHAVIOUR": "the per-split ranking through Spark",
    "tests/test_spark_streaming.py::test_max_files_per_trigger": "streaming: more micro-batch cases",
    "tests/test_spark_streaming.py::test_deletes_fail_the_stream": "streaming: more micro-batch cases",
    "tests/test_spark_streaming.py::test_sink_is_exactly_once": "streaming: more micro-batch cases",
    "tests/test_spark_streaming.py::test_complete_mode": "streaming: more micro-batch cases",
    "tests/test_spark_streaming.py::test_merge_on_write": "streaming: more micro-batch cases",
    "tests/test_spark_streaming.py::test_stream_with_a_query_returns": "streaming: a query over several "
    "micro-batches and appends (test_stream_where_columns_and_snippets_as_a_batch_read keeps a stream query)",
    # the fast tier passed 10 minutes again (11:31, 2026-12-02): more second Spark runs of features
    # whose Spark-free tests and one Spark test each stay in the fast tier
    "tests/test_docs_examples.py::test_page_examples_run[guide/companion-indexes.md]": "the companion "
    "guide's examples through Spark (test_companion.py keeps its Spark SQL test in the fast tier)",
    "tests/test_compact_strings.py::test_companion_build_through_spark_sql": "a compact-string companion "
    "built through Spark SQL (the Spark-free builds stay)",
    "tests/test_optimized_write.py::test_partitioned_write_splits_near_target": "optimized writes: the "
    "partitioned case (the unpartitioned Spark cases stay)",
    "tests/test_reference_tables.py::test_spark_sql_view_and_indexall_on_a_reference_table": "a reference "
    "table's SQL view (test_spark_stream_reads_a_reference_table keeps a Spark read of one)",
    "tests/test_companion_stream.py::test_follows_delta_through_20_commits_while_queries_run": "the "
    "continuous sync over 20 commits (its shorter cases stay)",
    "tests/test_docs_examples.py::test_page_examples_run[guide/streaming.md]": "the streaming guide's "
    "examples (test_spark_streaming.py keeps its Spark tests)",
    "tests/test_optimized_write.py::test_option_precedence_records_and_modes": "optimized writes: option "
    "precedence through Spark (the Spark-free precedence stays)",
    "tests/test_refusals.py::test_spark_refusals_more_routes": "the refusal matrix on the SQL scan route, "
    "the table functions, their UDTFs and search_join: a fresh Python worker per refused attempt (the same "
    "kinds stay in the fast tier on the Spark-free routes, which share the scan's checks)",
    "tests/test_first_hour.py::test_1_the_readme_quickstart_prints_what_it_says": "the README's Quickstart "
    "run as a script: a Spark of its own (tests/smoke runs it too; the Spark-free first hour stays)",
    "tests/test_first_hour.py::test_3_the_mistakes_in_a_spark_notebook": "the first hour's mistakes through "
    "Spark: a fresh Python worker per refused load() (their Spark-free twins stay in the fast tier)",
    "tests/test_refusals.py::test_spark_refusals": "the refusal matrix on the DataFrame read, SQL aggregates "
    "and SQL DELETE: a fresh Python worker per refused load() (~1-4 s each); the Spark-free routes, which "
    "share the scan's checks, stay in the fast tier",
    "tests/test_secrets_spark_ui.py": "a Spark program and a Spark Connect server of their own, started with "
    "fake secrets in their environment, their UIs searched (tests/test_secrets_everywhere.py stays)",
    # tables written by older commits' code (~25 s in all): the fast tier keeps the reads of the
    # 6-split vector table of c7f3a95 (~6 s), the case that found the cosine graph bug
    "tests/test_old_tables.py::test_reads_equal_the_older_codes_and_the_exact_answers[5392dfd-": "release "
    "0.2.0's tables, written by its own code in a process of their own, read by both codes",
    "tests/test_old_tables.py::test_reads_equal_the_older_codes_and_the_exact_answers[c7f3a95-merged]": "an "
    "older table its own code merged, read by both codes",
    "tests/test_old_tables.py::test_this_codes_writes_to_the_older_tables": "this code's append, delete "
    "and MERGE SPLITS on every older table, the reads checked after each",
    "tests/test_old_tables.py::test_a_large_cosine_table_read_with_the_default_options": "3 splits of "
    "21,000 vectors written by c7f3a95's code (~13 s)",
    "tests/test_old_tables.py::test_reads_of_the_older_tables_on_object_storage": "the older tables "
    "copied to both emulators and read there",
}


# The integration tier runs in pytest-xdist processes too (`--dist loadgroup`): a group per file,
# except that every test of a Connect server or of the standalone cluster shares one group, so each
# server starts in one process only (their fixtures are per process). tests/test_tiers.py checks that
# the groups reach pytest-xdist (tests/conftest.py's hook runs first; pytest is pinned for it).
CLUSTER_FIXTURES = frozenset({"standalone_cluster", "spark_cluster"})
CONNECT_FIXTURES = frozenset({"spark_connect_server", "connect_spark"})


def xdist_group(nodeid: str, fixturenames: frozenset[str] | set[str]) -> str:
    """The pytest-xdist group of an integration test."""
    if CLUSTER_FIXTURES & fixturenames:
        return "standalone cluster"
    if CONNECT_FIXTURES & fixturenames:
        return "spark connect server"
    return nodeid.split("::", 1)[0]


# The integration tier's heaviest groups, heaviest first (seconds of test time, the eighteenth session's
# runs), collected in this order and scheduled so (the Makefile's --no-loadscope-reorder; pytest-xdist
# would otherwise take the groups with the most tests first): each group goes whole to the next process
# that runs short of work, so a heavy group left for the end keeps one process busy alone.
HEAVY_GROUPS_FIRST = (
    "spark connect server",
    "standalone cluster",
    "tests/test_packed_env.py",
    "tests/test_spark_correctness.py",
    "tests/test_spark_filters.py",
    "tests/test_reliability_crash_load.py",
    "tests/test_sql_differential.py",
    "tests/test_relevance_corpus.py",
    "tests/test_spark_streaming.py",
    "tests/test_tiers.py",
    "tests/test_cloud_concurrency.py",
)


def heavy_group_first(group: str) -> int:
    """Sort key of an integration test by its group: HEAVY_GROUPS_FIRST's order, then the others."""
    return HEAVY_GROUPS_FIRST.index(group) if group in HEAVY_GROUPS_FIRST else len(HEAVY_GROUPS_FIRST)


# The fast tier's heaviest files, heaviest first (seconds of test time on 2026-12-03: the mean of two runs,
# 2 processes on 2 cores after the cuts of that day), collected first and scheduled so (the Makefile's
# --no-loadscope-reorder; pytest-xdist would otherwise take the files with the most tests first, and a
# heavy file of two tests came last): with `--dist loadfile` each file goes whole to the next free
# worker in collection order, so a heavy file collected last leaves the other worker idle at the end.
HEAVY_FIRST = (
    "tests/test_docs_examples.py",  # 96 s
    "tests/test_companion.py",  # 43
    "tests/test_spark_roundtrip.py",  # 41
    "tests/test_cloud_credentials.py",  # 37
    "tests/test_cloud_spark.py",  # 34
    "tests/test_spark_streaming.py",  # 33
    "tests/test_split_sparse_filters.py",  # 32
    "tests/test_storage.py",  # 32
    "tests/test_vector_search.py",  # 31
    "tests/test_compact_strings.py",  # 28
    "tests/test_cloud_faults.py",  # 27
    "tests/test_search_sql.py",  # 26
    "tests/test_split_sparse.py",  # 25
    "tests/test_sql_commands.py",  # 24
    "tests/test_transaction_concurrency.py",  # 22
    "tests/test_reference_transcode.py",  # 19
    "tests/test_table_search.py",  # 19
    "tests/test_reference_tables.py",  # 19
    "tests/test_log_freshness.py",  # 18
    "tests/test_aggregate.py",  # 18
    "tests/test_spark_columns.py",  # 17
    "tests/test_deletes.py",  # 16
)


def heavy_first(nodeid: str) -> int:
    """Sort key: the heavy files in HEAVY_FIRST's order, then every other file as collected."""
    path = nodeid.split("::", 1)[0]
    return HEAVY_FIRST.index(path) if path in HEAVY_FIRST else len(HEAVY_FIRST)
