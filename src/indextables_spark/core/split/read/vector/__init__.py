"""Vector search, each mechanism once: `query` (NearestQuery: what a search asks, built from a
caller's arguments), `nearest` (the nearest neighbours in one split's vector index), `selections`
(the rows a search's filters select in a split, kept for the next search), `split_search` (one
split's candidates under a ReadPlan), `fusion` (a hybrid search's two rankings fused), and
`table_search` (a table's or a task's splits: candidates first, then the winners' rows). Layer:
read/ (ReadPlan carries the NearestQuery; this package runs it)."""
