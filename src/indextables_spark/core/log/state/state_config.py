"""State-layer options (docs/reference/table-format.md, "Configuration keys"); the retries of state
writes are core/log/commit/policy.py's (`state.retry.*`)."""

from __future__ import annotations

from dataclasses import dataclass

from indextables_spark.config.options import Options
from indextables_spark.core.log.state.avro_container import avro_codec_name
from indextables_spark.errors import InvalidOptionError


@dataclass(frozen=True)
class StateConfig:
    format: str = "avro"  # state.format: avro | json
    compression: str = "zstd"  # state.compression: zstd | snappy | none
    compression_level: int = 3  # state.compressionLevel
    entries_per_manifest: int = 50_000  # state.entriesPerManifest
    read_parallelism: int = 8  # state.read.parallelism
    tombstone_threshold: float = 0.10  # state.compaction.tombstoneThreshold
    max_manifests: int = 20  # state.compaction.maxManifests
    large_remove_threshold: int = 2**31 - 1  # state.compaction.largeRemoveThreshold
    compact_after_merge: bool = True  # state.compaction.afterMerge
    retention_versions: int = 2  # state.retention.versions
    retention_hours: float = 168.0  # state.retention.hours
    gc_min_manifest_age_hours: float = 1.0  # state.gc.minManifestAgeHours
    renormalize_threshold: int = 5  # state.schema.renormalizeThreshold
    checkpoint_enabled: bool = True  # checkpoint.enabled
    checkpoint_interval: int = 10  # checkpoint.interval

    @classmethod
    def from_options(cls, o: Options) -> "StateConfig":
        fmt = (o.get_str("state.format", "avro") or "avro").strip().lower()
        if fmt in ("avro-state", "avro_state"):
            fmt = "avro"
        if fmt not in ("avro", "json"):
            raise InvalidOptionError(f"option 'spark.indextables.state.format': expected 'avro' or 'json', got {fmt!r}")
        comp = (o.get_str("state.compression", "zstd") or "zstd").strip().lower()
        avro_codec_name(comp)  # validates
        level = o.get_int("state.compressionLevel")
        if comp in ("zstd", "zstandard") and not 1 <= level <= 22:
            raise InvalidOptionError(f"option 'spark.indextables.state.compressionLevel': expected 1-22, got {level}")
        epm = o.get_int("state.entriesPerManifest")
        if epm < 1:
            raise InvalidOptionError(f"option 'spark.indextables.state.entriesPerManifest': must be >= 1, got {epm}")
        par = read_parallelism(o)
        return cls(
            format=fmt,
            compression=comp,
            compression_level=level,
            entries_per_manifest=epm,
            read_parallelism=par,
            tombstone_threshold=o.get_float("state.compaction.tombstoneThreshold"),
            max_manifests=o.get_int("state.compaction.maxManifests"),
            large_remove_threshold=o.get_int("state.compaction.largeRemoveThreshold"),
            compact_after_merge=o.get_bool("state.compaction.afterMerge"),
            retention_versions=o.get_int("state.retention.versions"),
            retention_hours=o.get_float("state.retention.hours"),
            gc_min_manifest_age_hours=o.get_float("state.gc.minManifestAgeHours"),
            renormalize_threshold=o.get_int("state.schema.renormalizeThreshold"),
            checkpoint_enabled=o.get_bool("checkpoint.enabled"),
            checkpoint_interval=o.get_int("checkpoint.interval"),
        )


def read_parallelism(o: Options) -> int:
    """`state.read.parallelism`: manifests / version files fetched at a time by a reader."""
    par = o.get_int("state.read.parallelism")
    if par < 1:
        raise InvalidOptionError(f"option 'spark.indextables.state.read.parallelism': must be >= 1, got {par}")
    return par
