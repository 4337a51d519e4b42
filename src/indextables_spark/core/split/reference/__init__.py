"""The splits the reference implementation (IndexTables4Spark) wrote: `quickwit` (its Quickwit
split bundle), `reference` (reading them: re-indexed into our format when they enter the cache).
Layer: after format/ and write/ (it re-indexes with write/), before cache/ (which calls it)."""
