"""The ways in besides Python: the command texts (`it.sql`) and their dispatcher, the command line, and the SQL
statements planned for the index (sqlplan/). The SQL table functions live in spark/ (they are Python UDTFs)."""
