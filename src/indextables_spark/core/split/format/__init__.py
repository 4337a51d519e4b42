"""What a split is on disk and how its columns are indexed: `column_specs` / `indexing` (schema +
options → ColumnSpecs), `doc_mapping` (specs ↔ the doc mapping, the Tantivy schema), `stats`
(min/max/null counts), `bloom` (Bloom filters), `bundle` / `composite` (the single-file format and
its index sections), `companion` (companion splits: the source files they index, the companion
table's configuration), `_tantivy` (the boundary to tantivy-py). The first layer of core/split."""
