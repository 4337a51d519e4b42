"""The single-file split format: layout, footer, validation errors."""

from __future__ import annotations

import io
import json
import os
import struct

import pytest

from indextables_spark.errors import IndexTablesError, SplitFormatError
from indextables_spark.core.split.format.bundle import (
    FOOTER_FILE,
    MAGIC,
    ROWS_NAME,
    RangeSource,
    bundle,
    extract,
    load_extracted_footer,
    read_footer,
)


@pytest.fixture
def split_file(tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    (index / "meta.json").write_bytes(b'{"segments": []}')
    (index / "abc.idx").write_bytes(b"\x00\x01" * 500)
    (index / ".tantivy-meta.lock").write_bytes(b"")  # lock files are not bundled
    (index / ".managed.json").write_bytes(b"[]")
    rows = tmp_path / "rows.arrow"
    rows.write_bytes(b"ARROW" * 100)
    out = tmp_path / "x.split"
    start, end = bundle(str(index), str(rows), '[{"name":"a"}]', str(out), num_rows=7, batch_rows=[5, 2])
    return str(out), start, end


def test_layout_and_footer(split_file, tmp_path):
    path, start, end = split_file
    data = open(path, "rb").read()
    assert end == len(data) and data[-8:] == MAGIC
    (flen,) = struct.unpack("<Q", data[-16:-8])
    assert start == len(data) - 16 - flen
    footer = json.loads(data[start : start + flen])
    assert footer["formatVersion"] == 1 and footer["createdBy"].startswith("indextables_spark")
    assert [f["name"] for f in footer["files"]] == ["abc.idx", "meta.json"]
    assert footer["rows"] == {
        "name": ROWS_NAME,
        "offset": 1000 + 16,
        "length": 500,
        "numRows": 7,
        "format": "arrow-ipc",
        "batchRows": [5, 2],
    }
    assert footer["docMapping"] == '[{"name":"a"}]'
    f0 = footer["files"][0]
    assert data[f0["offset"] : f0["offset"] + f0["length"]] == b"\x00\x01" * 500
    # every source kind reads the same footer
    parsed = [
        read_footer(path, "p"),
        read_footer(data, "p"),
        read_footer(io.BytesIO(data), "p"),
        read_footer(RangeSource(len(data), lambda s, e: data[s:e]), "p"),
    ]
    assert all(p == parsed[0] for p in parsed)
    assert parsed[0].footer_start == start and parsed[0].footer_end == end and parsed[0].num_rows == 7


def test_extract(split_file, tmp_path):
    path, _, _ = split_file
    for i, source in enumerate([path, open(path, "rb").read()]):
        dest = tmp_path / f"out{i}"
        extract(source, str(dest), "x.split")
        assert sorted(os.listdir(dest)) == sorted(["abc.idx", "meta.json", ROWS_NAME, FOOTER_FILE])
        assert (dest / "abc.idx").read_bytes() == b"\x00\x01" * 500
        assert (dest / ROWS_NAME).read_bytes() == b"ARROW" * 100
        assert load_extracted_footer(str(dest)).batch_rows == [5, 2]


def _rewrite_footer(data: bytes, change) -> bytes:
    (flen,) = struct.unpack("<Q", data[-16:-8])
    start = len(data) - 16 - flen
    footer = json.loads(data[start : start + flen])
    change(footer)
    new = json.dumps(footer).encode()
    return data[:start] + new + struct.pack("<Q", len(new)) + MAGIC


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d[:10], "truncated file: 10 bytes"),
        (lambda d: b"", "truncated file: 0 bytes"),
        (lambda d: d[:-3], "bad magic"),
        (lambda d: d[:-8] + b"PARQUET1", "bad magic b'PARQUET1'"),
        (lambda d: d[:-16] + struct.pack("<Q", 1 << 40) + MAGIC, "footer length 1099511627776 does not fit"),
        (lambda d: d[:-16] + struct.pack("<Q", 0) + MAGIC, "footer length 0"),
        (lambda d: _rewrite_footer(d, lambda f: f.update(formatVersion=3)), "unsupported split format version 3"),
        (lambda d: _rewrite_footer(d, lambda f: f.pop("formatVersion")), "unsupported split format version None"),
        (lambda d: _rewrite_footer(d, lambda f: f["files"][0].update(length=10**9)), "outside the data section"),
        (lambda d: _rewrite_footer(d, lambda f: f["rows"].update(offset=-1)), "outside the data section"),
        (lambda d: _rewrite_footer(d, lambda f: f["files"][0].update(name="../../etc/passwd")), "unsafe"),
        (lambda d: _rewrite_footer(d, lambda f: f["rows"].update(format="parquet")), "row store format"),
        (lambda d: _rewrite_footer(d, lambda f: f["rows"].update(numRows=8)), "numRows 8"),
        (lambda d: d[:-20] + b"{{{{" + d[-16:], "not valid UTF-8 JSON"),
    ],
)
def test_footer_validation_errors_name_the_split(split_file, mutate, match):
    path, _, _ = split_file
    bad = mutate(open(path, "rb").read())
    with pytest.raises(SplitFormatError, match=match) as e:
        read_footer(bad, "s3://bucket/t/splits/split-1.split")
    assert "s3://bucket/t/splits/split-1.split" in str(e.value)
    assert isinstance(e.value, IndexTablesError)


def test_missing_file(tmp_path):
    with pytest.raises(SplitFormatError, match="not found"):
        read_footer(str(tmp_path / "nope.split"), "nope.split")
