"""Pinned sources: taken from the mirror (HPCVIRT_SOURCE_MIRROR) or a URL,
always verified, never left half-written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcvirt import sources
from hpcvirt.benchmarks import REGISTRY, PinnedSource
from hpcvirt.sources import SOURCES, Source, SourceError, fetch, sha256_of

MIRROR = os.environ.get(sources.MIRROR_ENV)
needs_mirror = pytest.mark.skipif(not MIRROR or not Path(MIRROR).is_dir(),
                                  reason=f"no source mirror ({sources.MIRROR_ENV} unset)")


def test_every_pinned_benchmark_source_is_declared():
    for b in REGISTRY:
        if isinstance(b.build, PinnedSource):
            src = SOURCES.get(b.build.name)
            assert src is not None, f"{b.name}: no pinned source {b.build.name!r}"
            assert src.version == b.build.version
            assert all(len(sha) == 64 for _, sha, _ in src.files)


@needs_mirror
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_fetch_from_the_mirror_and_reuse_the_cache(name, tmp_path):
    rec = fetch(name, mirror=MIRROR, cache=tmp_path)
    assert rec["copy"] in ("mirror copy", "official archive") and rec["from"].startswith(MIRROR)
    assert sha256_of(Path(rec["path"])) == rec["sha256"]
    again = fetch(name, mirror=tmp_path / "no-such-mirror", cache=tmp_path)   # the cache is enough
    assert again["sha256"] == rec["sha256"] and again["from"].startswith("cache")


def _left(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_corrupted_copy_is_refused_naming_both_checksums(tmp_path):
    mirror, cache = tmp_path / "mirror", tmp_path / "cache"
    mirror.mkdir()
    (mirror / "NPB3.4.1.tar.gz").write_bytes(b"not the NAS Parallel Benchmarks\n")
    with pytest.raises(SourceError) as exc:
        fetch("NPB", mirror=mirror, cache=cache)
    msg = str(exc.value)
    actual = sha256_of(mirror / "NPB3.4.1.tar.gz")
    for needle in ("NPB3.4.1.tar.gz", actual, *(sha for _, sha, _ in SOURCES["NPB"].files),
                   "official archive", "mirror copy"):
        assert needle in msg, needle
    assert _left(cache) == []                       # nothing half-written stays


def test_missing_file_names_the_mirror_and_the_files(tmp_path):
    with pytest.raises(SourceError, match=r"none of \['IMB-v2021.3.tar.gz', 'mpi-benchmarks-IMB-v2021.3.tar.gz'\]"):
        fetch("IMB", mirror=tmp_path, cache=tmp_path / "cache")


def test_corrupted_cache_is_not_used(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "osu-micro-benchmarks-7.4.tar.gz").write_bytes(b"truncated")
    with pytest.raises(SourceError, match="from the cache"):
        fetch("osu-micro-benchmarks", mirror=tmp_path, cache=cache)


def test_download_path_verifies_too(tmp_path, monkeypatch):
    """The download code path, on a file:// URL (this machine reaches no mirror site)."""
    payload = tmp_path / "srv" / "demo-1.0.tar.gz"
    payload.parent.mkdir()
    payload.write_bytes(b"demo source\n")
    good = Source("demo", "1.0", (payload.as_uri(),), (("demo-1.0.tar.gz", sha256_of(payload), "official archive"),))
    monkeypatch.setitem(SOURCES, "demo", good)
    monkeypatch.delenv(sources.MIRROR_ENV, raising=False)
    rec = fetch("demo", cache=tmp_path / "cache")
    assert rec["from"] == payload.as_uri() and rec["copy"] == "official archive"
    bad = Source("demo", "1.0", (payload.as_uri(),), (("demo-1.0.tar.gz", "0" * 64, "official archive"),))
    monkeypatch.setitem(SOURCES, "demo", bad)
    with pytest.raises(SourceError, match="could not be fetched") as exc:
        fetch("demo", cache=tmp_path / "cache2")
    assert sha256_of(payload) in str(exc.value) and sources.MIRROR_ENV in str(exc.value)
    assert _left(tmp_path / "cache2") == []


def test_unknown_source():
    with pytest.raises(SourceError, match="no pinned source 'nope'"):
        fetch("nope")
