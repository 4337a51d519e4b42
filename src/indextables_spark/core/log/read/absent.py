"""The error for a location that holds no indextables table, with the next step: a Delta, Iceberg
or Parquet table there is searched in place through a companion index (BUILD INDEXTABLES
COMPANION), which a read of the table's own path cannot give."""

from __future__ import annotations

from typing import TYPE_CHECKING

from indextables_spark.core.log.model.paths import LOG_DIR
from indextables_spark.errors import StorageError, TableNotFoundError

if TYPE_CHECKING:
    from indextables_spark.core.storage import Storage


def missing_table_error(storage: Storage) -> TableNotFoundError:
    """TableNotFoundError for `storage`'s location, naming what else is there when it tells."""
    message = f"no indextables table at {storage.uri} (no {LOG_DIR}/ versions)"
    kind = other_format(storage)
    if kind is not None:
        message += (
            f": it holds a {kind.capitalize()} table. To search it in place, build a companion index of it, "
            f"BUILD INDEXTABLES COMPANION FOR {kind.upper()} '{storage.uri}' "
            f"INDEXING MODES ('<column>':'text') AT LOCATION '<index path>' "
            f"(or it.build_companion('{storage.uri}', '<index path>', format='{kind}', indexing={{'<column>': 'text'}})), "
            "then read the index path; string columns not named there are indexed whole (exact values), so "
            "name each column searched by words"
        )
    return TableNotFoundError(message)


def other_format(storage: Storage) -> str | None:
    """'delta', 'iceberg' or 'parquet' when the location holds such a table (Parquet: only where a
    listing is cheap, a local directory; an object store's recursive listing of a big dataset is not
    paid for an error message)."""
    try:
        if storage.list("_delta_log/"):
            return "delta"
        if any(f.key.endswith(".metadata.json") for f in storage.list("metadata/")):
            return "iceberg"
        if storage.local_path("_delta_log") is not None and any(f.key.endswith(".parquet") for f in storage.list("")):
            return "parquet"
    except (OSError, StorageError):  # the hint only: the error raised stays that no table is there
        return None
    return None
