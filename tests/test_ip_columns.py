"""`indexing.typemap.<col>=ip`: IPv4/IPv6 string columns searchable as addresses (ranges, CIDR
blocks) while filters keep Spark's string semantics; invalid addresses refused at write."""

from __future__ import annotations

import ipaddress
import random

import pyarrow as pa
import pytest

import indextables_spark as it
from indextables_spark.errors import QueryParseError, SchemaMismatchError

OPTIONS = {"indexing.typemap.ip": "ip"}


def addresses(n: int) -> list[str | None]:
    rng = random.Random(4)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.05:
            out.append(None)
        elif r < 0.25:
            out.append(
                str(
                    ipaddress.IPv6Address(
                        rng.getrandbits(128) if rng.random() < 0.5 else (0xFE80 << 112) + rng.getrandbits(16)
                    )
                )
            )
        else:
            out.append(f"10.{rng.choice([2, 10, 20])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}")
    return out


@pytest.fixture(scope="module")
def ips():
    return addresses(2000)


@pytest.fixture
def table(tmp_path, ips) -> it.IndexTable:
    path = str(tmp_path / "t")
    it.write_table(path, pa.table({"id": pa.array(range(len(ips)), pa.int64()), "ip": ips}), options=OPTIONS)
    return it.IndexTable(path)


def matching(ips, pred) -> list[int]:
    return [i for i, v in enumerate(ips) if v is not None and pred(ipaddress.ip_address(v))]


def test_query_syntax_ranges_and_cidr(table, ips):
    def ids(q):
        return sorted(table.search(q, columns=["id"]).column("id").to_pylist())

    in_10_2 = matching(ips, lambda a: a.version == 4 and a in ipaddress.ip_network("10.2.0.0/16"))
    assert ids("ip:[10.2.0.0 TO 10.2.255.255]") == ids("ip:10.2.0.0/16") == in_10_2
    assert ids('ip:"fe80::/64"') == matching(ips, lambda a: a.version == 6 and a in ipaddress.ip_network("fe80::/64"))
    one = next(v for v in ips if v and ":" not in v)
    assert ids(f"ip:{one}") == [i for i, v in enumerate(ips) if v == one]
    with pytest.raises(QueryParseError, match="not an IPv4/IPv6 address block"):
        table.search("ip:10.2.0.0/40")


def test_filters_keep_string_semantics(spark, table, ips):
    mem = spark.createDataFrame([(i, v) for i, v in enumerate(ips)], "id long, ip string")
    ours = spark.read.format("indextables").load(table.path)
    one = next(v for v in ips if v and ":" not in v)
    six = next(v for v in ips if v and ":" in v)
    for expr in [
        f"ip = '{one}'",
        f"ip in ('{one}', '{six}', 'nope')",
        "ip > '10.2'",
        "ip <= '10.20.5'",
        "ip like '10.2.%'",
        "ip is null",
        f"ip <> '{one}'",
        "ip = '300.1.1.1'",
    ]:
        got = sorted(r.id for r in ours.filter(expr).select("id").collect())
        want = sorted(r.id for r in mem.filter(expr).select("id").collect())
        assert got == want, expr
    assert sorted(table.to_arrow(where=f"ip = '{one}'", columns=["id"]).column("id").to_pylist()) == [
        i for i, v in enumerate(ips) if v == one
    ]


def test_invalid_address_is_a_write_error(spark, tmp_path):
    bad = pa.table({"id": [1, 2], "ip": ["10.0.0.1", "10.0.0.300"]})
    with pytest.raises(SchemaMismatchError, match=r"column 'ip' .*'10\.0\.0\.300' is not an IPv4 or IPv6 address"):
        it.write_table(str(tmp_path / "a"), bad, options=OPTIONS)
    assert not it.IndexTable(str(tmp_path / "a")).exists()
    df = spark.createDataFrame([(1, "10.0.0.1"), (2, "fe80::zz")], "id long, ip string")
    with pytest.raises(Exception, match=r"'fe80::zz' is not an IPv4 or IPv6 address"):
        df.write.format("indextables").option("spark.indextables.indexing.typemap.ip", "ip").save(str(tmp_path / "b"))
