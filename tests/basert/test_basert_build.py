"""build.sh: builds every variant into the cache, and skips the work when nothing changed."""

from __future__ import annotations

from pathlib import Path

from basert_helpers import LIB_NAME, VARIANTS, build_engines


def test_build_is_idempotent(tmp_path: Path) -> None:
    cache = tmp_path / "native"
    first = build_engines(cache)
    assert first.returncode == 0, first.stderr
    assert f"built {len(VARIANTS)} variants" in first.stdout
    libs = [cache / "basert" / v / LIB_NAME for v in VARIANTS]
    model = cache / "basert" / "models" / "tiny.base"
    assert all(p.is_file() for p in libs) and model.read_bytes()[:4] == b"BASE"
    stamps = {p: p.stat().st_mtime_ns for p in [*libs, model]}

    again = build_engines(cache)
    assert again.returncode == 0 and "up to date" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps

    libs[3].unlink()  # an output gone: rebuilt
    third = build_engines(cache)
    assert third.returncode == 0 and "built" in third.stdout and libs[3].is_file()

    (cache / "basert" / ".stamp").write_text("stale\n")  # inputs changed: rebuilt
    assert "built" in build_engines(cache).stdout
    assert not list((cache / "basert").rglob(".*.[0-9]*"))  # no temporary left behind
