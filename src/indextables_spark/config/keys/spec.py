"""What a row of the option registry is (config/registry.py): an option's key, type, default,
documentation, secrecy and the IndexTables4Spark key it matches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class OptionSpec:
    key: str  # without the `spark.indextables.` prefix; `.<col>` marks a family
    type: str  # str | int | float | bool | size | duration (milliseconds)
    default: Any  # None: unset (or computed where read, as `doc` says)
    doc: str
    secret: bool = False
    readme: bool = True  # listed in the configuration table (docs/configuration.md)
    reference: str = ""  # the IndexTables4Spark key it matches ("" : none, or not stated)

    @property
    def family(self) -> bool:
        return "<" in self.key

    @property
    def names_properties(self) -> bool:
        """A family whose suffix is another library's property name (`iceberg.catalog.<name>.<key>`:
        pyiceberg's `uri`, `token`, `s3.secret-access-key`), not the name of a column or a catalog."""
        return self.key.endswith(".<key>")

    @property
    def prefix(self) -> str:
        """The fixed part of a family's key (`indexing.typemap.`)."""
        return self.key[: self.key.index("<")].lower() if self.family else self.key.lower()
