"""The boundary to tantivy-py (util/tantivy_calls.py: below expr/, whose SearchQuery parses queries)."""

from __future__ import annotations

from indextables_spark.util.tantivy_calls import TantivyError, _is_panic, tantivy_call

__all__ = ["TantivyError", "_is_panic", "tantivy_call"]
