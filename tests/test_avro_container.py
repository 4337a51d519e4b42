"""log/avro_container.read_records: the pure-Python reader of small Avro containers (the state
manifest) decodes exactly what fastavro decodes, and declines (None) what it does not cover."""

from __future__ import annotations

import io

import fastavro
import pytest

from indextables_spark.errors import CorruptStateError
from indextables_spark.core.log.state.avro_container import read_header, read_records
from indextables_spark.core.log.state.state_manifest import (
    ManifestInfo,
    StateManifest,
    decode_state_manifest,
    encode_state_manifest,
)

PLAIN = {
    "type": "record",
    "name": "R",
    "namespace": "t",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "by", "type": "bytes"},
        {"name": "s", "type": {"type": "string"}},
        {"name": "n", "type": "null"},
        {"name": "u", "type": ["null", "string", "long"]},
        {"name": "a", "type": {"type": "array", "items": {"type": "map", "values": ["null", "double"]}}},
        {
            "name": "m",
            "type": {
                "type": "map",
                "values": {"type": "record", "name": "In", "fields": [{"name": "x", "type": ["null", "string"]}]},
            },
        },
    ],
}


def _records(n: int) -> list[dict]:
    return [
        {
            "b": i % 2 == 0,
            "i": -(2**31) + i,
            "l": 2**63 - 1 - i,
            "f": 1.5 * i,
            "d": -0.1 * i,
            "by": bytes(range(i % 7)),
            "s": "é✓" * (i % 3),
            "n": None,
            "u": [None, "x", -i][i % 3],
            "a": [{"k": None, "q": 0.5}] * (i % 4),
            "m": {f"k{j}": {"x": None if j % 2 else "v"} for j in range(i % 5)},
        }
        for i in range(n)
    ]


def _container(schema, records, codec: str, block_size: int = 16000) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec=codec, sync_interval=block_size)
    return buf.getvalue()


@pytest.mark.parametrize("codec", ["null", "deflate", "zstandard"])
def test_plain_schemas_decode_as_fastavro_does(codec):
    data = _container(PLAIN, _records(300), codec, block_size=2000)  # several blocks
    got = read_records(data, read_header(data, "x"), "x")
    assert got is not None and got == list(fastavro.reader(io.BytesIO(data)))


def test_state_manifest_round_trip_without_fastavro():
    sm = StateManifest(
        state_version=7,
        created_at=123,
        num_files=3,
        total_bytes=99,
        manifests=[ManifestInfo("manifests/manifest-a.avro", 3, 1, 7, {"day": ("2024-01-01", None)}, 1, 2)],
        tombstones=["x.split"],
        schema_registry={"h": "{}"},
        metadata='{"id": "t"}',
    )
    for codec in ("zstd", "none"):
        data = encode_state_manifest(sm, codec)
        header = read_header(data, "x")
        assert read_records(data, header, "x") == list(fastavro.reader(io.BytesIO(data)))
        assert decode_state_manifest(data, "x") == sm


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "record",
            "name": "L",
            "fields": [{"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}],
        },
        {
            "type": "record",
            "name": "E",
            "fields": [{"name": "e", "type": {"type": "enum", "name": "C", "symbols": ["A"]}}],
        },
        {"type": "record", "name": "F", "fields": [{"name": "f", "type": {"type": "fixed", "name": "X", "size": 2}}]},
        {
            "type": "record",
            "name": "N",
            "fields": [
                {"name": "a", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "long"}]}},
                {"name": "b", "type": "In"},  # a named-type reference
            ],
        },
    ],
)
def test_declines_what_it_does_not_cover(schema):
    data = _container(schema, [], "null")
    assert read_records(data, read_header(data, "x"), "x") is None


def test_declines_snappy_and_reports_damage():
    data = _container(PLAIN, _records(5), "snappy")
    assert read_records(data, read_header(data, "x"), "x") is None
    good = _container(PLAIN, _records(5), "null")
    header = read_header(good, "x")
    for damaged in (good[:-20], good[:-40] + good[-16:]):  # truncated; a block cut short
        with pytest.raises(CorruptStateError):
            read_records(damaged, header, "x")
