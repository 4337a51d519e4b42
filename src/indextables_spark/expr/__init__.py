"""Expressions: the filter model (model.py), its parsers (partition-filter / where text, SQL conditions), its
evaluation over Arrow, data skipping and partition pruning, and its translation into Tantivy queries."""
