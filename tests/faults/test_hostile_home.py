"""Nothing under SUPERFLUID_HOME is trusted to be what its name says (issue 14, items 2, 8, 9, 10).

Each table plants one hostile or broken thing in a home holding two good baseRT installs, then runs
the real commands: none hangs (each has seconds), none prints a traceback, none writes outside the
home, a good install is never changed, ``current`` is never removed while it could name a good
install, and each command says what it found.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.conftest import Home, tree_digest

OUTSIDE_TEXT = "precious: not superfluid's\n"


def _outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside.json"
    target.write_text(OUTSIDE_TEXT)
    return target


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    make(path)


def _write(data: bytes) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(data)


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _link_to(target: str) -> Callable[[Path], None]:
    return lambda p: os.symlink(target, p)


def _sparse(size: int) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        with open(p, "wb") as f:
            f.truncate(size)
    return make


def _dir(p: Path) -> None:
    p.mkdir()
    (p / "x").write_text("{}")


#: hostile receipts: (id, how it is made, a fragment of the reason runtimes gives)
RECEIPTS = [
    pytest.param(_write(b"garbage\n"), "is not valid JSON", id="garbage"),
    pytest.param(_write(b'{"id": "basert", "version": "\xff\xfe"}'), "not UTF-8", id="not-utf8"),
    pytest.param(_write(b"[" * 100000 + b"]" * 100000), "nested too deeply", id="nested-100000"),
    pytest.param(_write(b'{"schema": "superfluid-runtime/1", "id": "basert", "install": "0.4.0-cpu", '
                        b'"version": "\\ud800", "worker": "bin/superfluid-worker-basert"}'), "lone surrogate",
                 id="lone-surrogate"),
    pytest.param(_fifo, "FIFO", id="fifo"),
    pytest.param(_link_to("/dev/zero"), "symbolic link", id="link-to-dev-zero"),
    pytest.param(_sparse(1 << 30), "larger than", id="one-gib"),
    pytest.param(_dir, "directory", id="directory"),
    pytest.param(_write(b"[]"), "not a JSON object", id="array"),
    pytest.param(_write(b'{"schema": "superfluid-runtime/1", "id": "basert", "install": "0.3.1-cpu", '
                        b'"version": "0.3.1", "backend": "cpu", "worker": "bin/superfluid-worker-basert", '
                        b'"tested": true}'), "describes the install '0.3.1-cpu'", id="another-install"),
]


@pytest.mark.parametrize(("make", "reason"), RECEIPTS)
def test_a_broken_current_receipt_is_shown_then_repaired_in_place(installed_home: Home, make: Callable[[Path], None],
                                                                  reason: str) -> None:
    receipt = installed_home.basert / "0.4.0-cpu" / "runtime.json"
    _replace(receipt, make)
    other = tree_digest(installed_home.basert / "0.3.1-cpu")

    row = next(r for r in installed_home.sf("runtimes", "--json").json() if r["id"] == "basert")
    assert row["state"] == "broken" and row["install"] == "0.4.0-cpu"
    assert reason in row["ready"] and row["fix"] == "superfluid runtime repair basert 0.4.0-cpu", row
    assert row["requires"] == {"header": "0.4.0", "abi": 1}

    run = installed_home.sf("runtime", "use", "basert", "0.4.0-cpu")
    assert run.code == 1 and "0.4.0-cpu is broken" in run.stderr
    assert installed_home.current() == "0.4.0-cpu"  # a refused use changes nothing
    run = installed_home.sf("runtime", "update", "basert",
                            *installed_home.repair_flags())  # reads every receipt: never hangs
    assert run.code == 0, run.stderr
    assert tree_digest(installed_home.basert / "0.3.1-cpu") == other

    run = installed_home.sf("runtime", "repair", "basert", *installed_home.repair_flags())
    assert run.code == 0, run.stderr
    # that install, not the older one (the update above reinstalled it already: a repair that finds
    # every file as its receipt records it changes nothing, issue 22)
    assert "basert 0.4.0-cpu installed" in run.stdout or \
        "every file of basert 0.4.0-cpu is as its receipt records it: nothing to repair" in run.stdout
    assert installed_home.current() == "0.4.0-cpu"
    assert json.loads(receipt.read_text())["install"] == "0.4.0-cpu"
    assert tree_digest(installed_home.basert / "0.3.1-cpu") == other
    assert next(r for r in installed_home.sf("runtimes", "--json").json() if r["id"] == "basert")["state"] == "ready"


@pytest.mark.parametrize(("make", "reason"), RECEIPTS)
def test_a_broken_install_is_removed_and_current_moves_first(installed_home: Home, make: Callable[[Path], None],
                                                            reason: str) -> None:
    _replace(installed_home.basert / "0.4.0-cpu" / "runtime.json", make)
    run = installed_home.sf("runtime", "remove", "basert", "0.4.0-cpu")
    assert run.code == 0, run.stderr
    assert not (installed_home.basert / "0.4.0-cpu").exists()
    assert installed_home.current() == "0.3.1-cpu"
    assert sorted(n for n in os.listdir(installed_home.basert) if n.startswith(".")) == [".install.lock"]


def test_use_auto_never_removes_current_when_no_receipt_reads(installed_home: Home) -> None:
    assert installed_home.sf("runtime", "use", "basert", "0.4.0-cpu").code == 0  # pinned: the pin stays too
    for install in ("0.3.1-cpu", "0.4.0-cpu"):
        (installed_home.basert / install / "runtime.json").write_text("unreadable")
    before = tree_digest(installed_home.basert)
    run = installed_home.sf("runtime", "use", "basert", "--auto")
    assert run.code == 1
    assert "no install of basert reads" in run.stderr and "current still names 0.4.0-cpu" in run.stderr
    assert "superfluid runtime repair basert" in run.stderr
    assert installed_home.current() == "0.4.0-cpu" and tree_digest(installed_home.basert) == before
    assert (installed_home.basert / "pinned").read_text() == "0.4.0-cpu\n"
    row = next(r for r in installed_home.sf("runtimes", "--json").json() if r["id"] == "basert")
    assert row["state"] == "broken" and row["install"] == "0.4.0-cpu"


def test_a_receipt_linked_out_of_the_home_is_not_followed(installed_home: Home, tmp_path: Path) -> None:
    good = tmp_path / "good-receipt.json"
    good.write_text((installed_home.basert / "0.4.0-cpu" / "runtime.json").read_text())
    _replace(installed_home.basert / "0.4.0-cpu" / "runtime.json", _link_to(str(good)))
    before = good.read_bytes()
    row = next(r for r in installed_home.sf("runtimes", "--json").json() if r["id"] == "basert")
    assert row["state"] == "broken" and "symbolic link" in row["ready"]
    assert installed_home.sf("runtime", "repair", "basert", *installed_home.repair_flags()).code == 0
    assert good.read_bytes() == before and not (installed_home.basert / "0.4.0-cpu" / "runtime.json").is_symlink()


# -- current ----------------------------------------------------------------------------------------


def _current_outside(tmp_path: Path) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        out = tmp_path / "elsewhere" / "0.4.0-cpu"
        out.parent.mkdir()
        import shutil

        shutil.copytree(p.parent / "0.4.0-cpu", out, symlinks=True)
        os.symlink(str(out), p)
    return make


#: hostile `current`: (maker given the tmp_path, fragment of the reason runtimes gives)
CURRENTS = [
    pytest.param(lambda t: _link_to("9.9.9-cpu"), "is dangling", id="dangling"),
    pytest.param(lambda t: _link_to("current"), "loop", id="loop-to-itself"),
    pytest.param(lambda t: _write(b"0.3.1-cpu\n"), "is a regular file", id="regular-file"),
    pytest.param(lambda t: _dir, "is a directory", id="directory"),
    pytest.param(_current_outside, "points outside", id="outside-the-home"),
    pytest.param(lambda t: _link_to("../../../../../../etc"), "points outside", id="dotdot-out"),
    pytest.param(lambda t: _link_to(".install.lock"), "not an install", id="the-lock"),
]


@pytest.mark.parametrize(("maker", "fragment"), CURRENTS)
def test_a_bad_current_is_reported_and_fixed_without_changing_an_install(
        installed_home: Home, tmp_path: Path, maker: Callable[[Path], Callable[[Path], None]], fragment: str) -> None:
    installs = {n: tree_digest(installed_home.basert / n) for n in ("0.3.1-cpu", "0.4.0-cpu")}
    _replace(installed_home.basert / "current", maker(tmp_path))

    row = next(r for r in installed_home.sf("runtimes", "--json").json() if r["id"] == "basert")
    assert row["state"] == "broken" and fragment in row["ready"], row
    assert "elsewhere" not in json.dumps(row) or "points outside" in row["ready"]
    assert "abi" not in row and "install" not in row

    run = installed_home.sf("runtime", "use", "basert", "--auto")
    assert run.code == 0, run.stderr
    assert installed_home.current() == "0.4.0-cpu"
    assert {n: tree_digest(installed_home.basert / n) for n in installs} == installs

    _replace(installed_home.basert / "current", _link_to("9.9.9-cpu"))
    run = installed_home.sf("runtime", "repair", "basert", *installed_home.repair_flags())
    assert run.code == 0, run.stderr
    assert installed_home.current() == "0.4.0-cpu"
    assert tree_digest(installed_home.basert / "0.3.1-cpu") == installs["0.3.1-cpu"]


def test_nothing_runs_from_a_current_that_points_out_of_the_home(installed_home: Home, tmp_path: Path) -> None:
    """A llama.cpp `current` linked to a directory outside the home whose worker would leave a mark:
    `runtimes` never runs it, and reports the link."""
    mark = tmp_path / "ran"
    out = tmp_path / "evil"
    (out / "bin").mkdir(parents=True)
    (out / "lib").mkdir()
    worker = out / "bin" / "superfluid-worker-llamacpp"
    worker.write_text(f"#!/bin/sh\ntouch {mark}\necho '{{\"available\": true}}'\n")
    worker.chmod(0o755)
    (out / "lib" / "libllama.so").write_bytes(b"\x7fELF not really")
    root = installed_home.path / "runtimes" / "llamacpp"
    root.mkdir()
    os.symlink(str(out), root / "current")
    row = next(r for r in installed_home.sf("runtimes", "--json").json() if r["id"] == "llamacpp")
    assert not mark.exists()
    assert row["state"] == "broken" and "points outside" in row["ready"]
    run = installed_home.sf("runtime", "check", "llamacpp")
    assert not mark.exists() and run.code == 1


# -- pinned, the lock, the caches -------------------------------------------------------------------


PINNED = [
    pytest.param(_fifo, id="fifo"),
    pytest.param(_link_to("/dev/zero"), id="link-to-dev-zero"),
    pytest.param(_dir, id="directory"),
    pytest.param(_write(b"\xff\xfe\x00garbage"), id="not-utf8"),
    pytest.param(_write(b"../../etc\n"), id="traversal"),
]


@pytest.mark.parametrize("make", PINNED)
def test_a_hostile_pinned_is_no_pin(installed_home: Home, make: Callable[[Path], None]) -> None:
    _replace(installed_home.basert / "pinned", make)
    assert installed_home.sf("runtimes").code == 0
    run = installed_home.sf("runtime", "use", "basert", "--auto")
    assert run.code == 0, run.stderr
    assert installed_home.current() == "0.4.0-cpu" and not (installed_home.basert / "pinned").exists()
    _replace(installed_home.basert / "pinned", make)
    assert installed_home.sf("runtime", "remove", "basert", "0.3.1-cpu").code == 0
    assert installed_home.current() == "0.4.0-cpu"


LOCKS = [
    pytest.param("symlink", "is a symbolic link", id="symlink-out"),
    pytest.param("hardlink", "other hard links", id="hardlink-out"),
    pytest.param("fifo", "not a regular file", id="fifo"),
    pytest.param("dir", "cannot open", id="directory"),
]


@pytest.mark.parametrize(("kind", "fragment"), LOCKS)
def test_a_lock_file_that_is_not_one_is_refused_and_nothing_outside_is_written(installed_home: Home, tmp_path: Path,
                                                                              kind: str, fragment: str) -> None:
    outside = _outside(tmp_path)
    lock = installed_home.basert / ".install.lock"
    lock.unlink()
    if kind == "symlink":
        os.symlink(str(outside), lock)
    elif kind == "hardlink":
        try:
            os.link(outside, lock)
        except OSError:
            pytest.skip("the temporary directory and the home are on different file systems")
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    before = tree_digest(installed_home.basert)
    for argv in (["runtime", "use", "basert", "--auto"], ["runtime", "remove", "basert", "0.3.1-cpu"],
                 ["runtime", "install", "basert", "--mirror", str(installed_home.mirror), "--version", "0.3.1"]):
        run = installed_home.sf(*argv)
        assert run.code == 1 and fragment in run.stderr and str(lock) in run.stderr, (argv, run.stderr)
    assert outside.read_text() == OUTSIDE_TEXT
    assert tree_digest(installed_home.basert) == before


ANSWER_CACHES = [
    pytest.param(_link_to("/dev/zero"), id="link-to-dev-zero"),
    pytest.param(_fifo, id="fifo"),
    pytest.param(_write(b'{"a": ' * 100000), id="nested-100000"),
    pytest.param(_write(b"\xff" * 64), id="not-utf8"),
    pytest.param(_sparse(1 << 30), id="one-gib"),
]

CHECKER = """#!/bin/sh
echo '{"runtime": {"id": "llamacpp", "version": "llama.cpp test"}, "available": true, "devices": []}'
"""


@pytest.mark.parametrize("make", ANSWER_CACHES)
def test_a_hostile_answer_cache_is_ignored_and_replaced(installed_home: Home, tmp_path: Path,
                                                       make: Callable[[Path], None]) -> None:
    worker = tmp_path / "checker"
    worker.write_text(CHECKER)
    worker.chmod(0o755)
    cache = installed_home.path / "cache" / "answers.json"
    _replace(cache, make)
    env = dict(installed_home.env, SUPERFLUID_WORKER_LLAMACPP=str(worker))
    for _ in range(2):
        run = installed_home.sf("runtimes", "--json", env=env)
        assert run.code == 0
        assert next(r for r in run.json() if r["id"] == "llamacpp")["state"] == "ready"
    assert cache.is_file() and not cache.is_symlink() and cache.stat().st_size < 1 << 20


def test_hostile_http_cache_records_and_blobs_are_never_followed(installed_home: Home, tmp_path: Path) -> None:
    """Every HTTP record a link to /dev/zero, every cached blob a FIFO, a partial download linked
    to a file outside the home: installing again from the mirror still works, and writes nothing
    out of the home."""
    outside = _outside(tmp_path)
    cache = installed_home.path / "cache"
    for record in (cache / "http").iterdir():
        _replace(record, _link_to("/dev/zero"))
    for blob in (cache / "sha256").iterdir():
        _replace(blob, _fifo)
    from tests.end_to_end.releases import bundle_name

    digest = (installed_home.mirror / "basecompute" / "baseRT" / "releases" / "download" / "v0.3.1" /
              f"{bundle_name('0.3.1')}.sha256").read_text().split()[0]
    (cache / "partial").mkdir(exist_ok=True)
    os.symlink(str(outside), cache / "partial" / f"sha256-{digest}.partial")
    run = installed_home.sf("runtime", "install", "basert", "--mirror", str(installed_home.mirror), "--version",
                            "0.3.1")
    assert run.code == 0, run.stderr
    assert outside.read_text() == OUTSIDE_TEXT
    assert json.loads((installed_home.basert / "0.3.1-cpu" / "runtime.json").read_text())["version"] == "0.3.1"


@pytest.mark.parametrize("linked", ["runtimes/basert", "runtimes", "cache"])
def test_a_folder_of_the_home_linked_out_is_never_written_through(installed_home: Home, tmp_path: Path,
                                                                  linked: str) -> None:
    """A link inside the home to a directory outside it (a copy of what was there): no command writes
    through it, each says which link, and what it points at is unchanged."""
    import shutil

    inside = installed_home.path / linked
    outside = tmp_path / "outside" / linked.replace("/", "-")
    outside.parent.mkdir()
    shutil.move(str(inside), str(outside))
    os.symlink(str(outside), inside)
    before = tree_digest(outside)
    for argv in (["runtime", "use", "basert", "--auto"], ["runtime", "remove", "basert", "0.3.1-cpu"],
                 ["runtime", "install", "basert", "--mirror", str(installed_home.mirror), "--version", "0.3.0"],
                 ["runtime", "repair", "basert", "--mirror", str(installed_home.mirror)]):
        run = installed_home.sf(*argv)
        if linked == "cache" and argv[1] != "install":
            # they write nothing to the cache (a repair finds its bytes there): read through the link is fine
            assert run.code == 0, run.stderr
            continue
        assert run.code == 1 and "is a symbolic link" in run.stderr and str(inside) in run.stderr, (argv, run.stderr)
    assert tree_digest(outside) == before
