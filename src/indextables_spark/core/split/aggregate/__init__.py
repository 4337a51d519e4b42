"""Aggregations answered from the index: `agg_request` (requests: model, parsing, validation),
`aggregate` (per-split partials over a table's splits), `agg_result` (partials merged into
results), `group_aggregate` (SQL GROUP BY aggregates)."""
