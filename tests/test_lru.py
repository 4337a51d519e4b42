"""util/lru.py: the package's one LRU (bounded by entries, by weight, per process)."""

from __future__ import annotations

import os

import pytest

from indextables_spark.util.lru import LruCache


def test_least_recently_used_goes_first() -> None:
    c: LruCache[int] = LruCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # "b" is now the least recent
    c.put("c", 3)
    assert c.keys() == ["a", "c"]
    assert "b" not in c and len(c) == 2


def test_put_if_absent_keeps_the_first_and_get_or_build_builds_once() -> None:
    c: LruCache[str] = LruCache(4)
    assert c.put_if_absent("k", "first") == "first"
    assert c.put_if_absent("k", "second") == "first"
    built: list[str] = []
    assert c.get_or_build("j", lambda: built.append("j") or "j") == "j"
    assert c.get_or_build("j", lambda: built.append("j") or "again") == "j"
    assert built == ["j"]


def test_weight_bound_drops_until_the_rest_fit() -> None:
    c: LruCache[bytes] = LruCache(None, max_weight=10, weigh=len)
    c.put("a", b"xxxx")
    c.put("b", b"xxxx")
    c.put("a", b"xx")  # replacing an entry re-weighs it
    c.put("c", b"xxxxx")  # 4 + 2 + 5 > 10: "b" (least recent) goes
    assert c.keys() == ["a", "c"]
    assert c.pop("a") == b"xx" and c.pop("a") is None
    c.put("d", b"x" * 5)  # 5 + 5 fits again only because the pop gave its weight back
    assert c.keys() == ["c", "d"]
    c.clear()
    c.put("e", b"x" * 10)
    assert c.keys() == ["e"]


def test_weight_needs_a_weigher() -> None:
    with pytest.raises(ValueError):
        LruCache(None, max_weight=10)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_per_process_cache_starts_empty_in_a_forked_child() -> None:
    c: LruCache[int] = LruCache(4, per_process=True)
    c.put("a", 1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports what it sees, then leaves without running pytest's teardown
        os.write(w, b"%d" % len(c))
        os._exit(0)
    os.close(w)
    seen = os.read(r, 16)
    os.waitpid(pid, 0)
    assert seen == b"0" and c.get("a") == 1
