"""BUILD INDEXTABLES COMPANION: `build` (the command: plan, index tasks, commit), `arguments`
(CompanionArguments: what a build and a streaming sync share), `columns` (its column selection),
`sync` (which source files a build indexes, the one commit), `stream` (an index that follows its
source), `sources/` (the Delta, Iceberg and Parquet sources). Layer: after write/, before
maintenance/."""
