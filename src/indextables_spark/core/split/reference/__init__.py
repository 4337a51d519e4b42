"""The splits the reference implementation (IndexTables4Spark) wrote: `quickwit` (its Quickwit
split bundle), `transcode` (its SSTable term dictionaries as the FSTs tantivy-py reads), `native`
(the split extracted and opened in place), `docstore` (its rows, from Tantivy's document store),
`reference` (which splits it wrote, its column specs, its stored values typed by the table schema).
Layer: after format/ and write/, before cache/ (which calls it)."""
