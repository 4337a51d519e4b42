"""Building splits: `documents` (Arrow rows → Tantivy documents), `builder` (SplitWriter: Arrow
batches → uploaded splits → AddFile actions). Layer: after format/ only."""
