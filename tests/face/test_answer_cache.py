"""``superfluid.answer_cache``: a kept output is printed again only while everything it was computed
from is the same; any change, an expired age, a named worker or a bad cache file computes it anew. What
an answer about the runtimes depends on is ``superfluid.commands.runtimes``' to say."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from superfluid import answer_cache
from superfluid.commands.runtimes import answer_vars, depends_on

ARGV = ["runtimes", "--json"]
OUTPUT = '[{"id": "basert", "state": "ready"}]\n'


@pytest.fixture
def deps(tmp_path: Path) -> list[str]:
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "libbaseRT.so").write_bytes(b"\x7fELF one")
    (tmp_path / "runtime.json").write_text("{}\n")
    os.symlink("lib", tmp_path / "current")
    found = [str(folder), str(folder / "libbaseRT.so"), str(tmp_path / "runtime.json"), str(tmp_path / "current"),
            str(tmp_path / "absent")]
    time.sleep(answer_cache.RACY_SECONDS + 0.05)  # written before the computations of the tests began
    return found


@pytest.fixture
def environ(sf_home: Path) -> dict[str, str]:
    return {"SUPERFLUID_HOME": str(sf_home), "PATH": "/usr/bin:/bin"}


def _kept(environ: dict[str, str], deps: list[str], argv: list[str] = ARGV, began: float | None = None) -> bool:
    return answer_cache.keep(argv, environ, OUTPUT, began=time.time() if began is None else began, deps=deps,
                             names=answer_vars())


def _file(environ: dict[str, str]) -> Path:
    return Path(environ["SUPERFLUID_HOME"]) / "cache" / "outputs.json"


def test_a_kept_output_is_printed_again_while_nothing_changed(environ: dict[str, str], deps: list[str]) -> None:
    assert answer_cache.lookup(ARGV, environ) is None  # nothing kept yet
    assert _kept(environ, deps)
    assert answer_cache.lookup(ARGV, environ) == OUTPUT
    assert answer_cache.lookup(["runtimes"], environ) is None  # another command line: its own output


def test_the_command_line_and_environment_are_inputs(environ: dict[str, str], deps: list[str]) -> None:
    assert _kept(environ, deps)
    assert answer_cache.lookup(ARGV, {**environ, "BASERT_LIB": "/opt/other"}) is None
    assert answer_cache.lookup(ARGV, {**environ, "PATH": "/bin"}) is None
    assert answer_cache.lookup(ARGV, {k: v for k, v in environ.items() if k != "PATH"}) is None
    # the shell's bookkeeping is not an input
    assert answer_cache.lookup(ARGV, {**environ, "_": "/usr/bin/superfluid", "SHLVL": "3"}) == OUTPUT


@pytest.mark.parametrize("change", ["rewrite", "grow", "replace", "remove", "create", "relink", "add-to-folder",
                                    "chmod"])
def test_any_change_to_a_dependency_computes_it_anew(environ: dict[str, str], deps: list[str], tmp_path: Path,
                                                     change: str) -> None:
    assert _kept(environ, deps)
    lib = tmp_path / "lib" / "libbaseRT.so"
    if change == "rewrite":  # same size, in place: the times and the change time move
        time.sleep(0.01)
        lib.write_bytes(b"\x7fELF two")
    elif change == "grow":
        with lib.open("ab") as f:
            f.write(b"more")
    elif change == "replace":  # another file renamed over it: a new inode
        (tmp_path / "new.so").write_bytes(b"\x7fELF one")
        os.replace(tmp_path / "new.so", lib)
    elif change == "remove":
        (tmp_path / "runtime.json").unlink()
    elif change == "create":
        (tmp_path / "absent").write_text("now here")
    elif change == "relink":  # `current` pointed elsewhere
        os.unlink(tmp_path / "current")
        (tmp_path / "lib2").mkdir()
        os.symlink("lib2", tmp_path / "current")
    elif change == "add-to-folder":
        (tmp_path / "lib" / "libbaseRT.so.0").write_bytes(b"")
    elif change == "chmod":
        lib.chmod(0o600)
    assert answer_cache.lookup(ARGV, environ) is None


def test_an_output_older_than_its_age_is_not_printed(environ: dict[str, str], deps: list[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answer_cache, "KEEP_SECONDS", 0.5)
    assert _kept(environ, deps)
    assert answer_cache.lookup(ARGV, environ) == OUTPUT
    time.sleep(0.55)
    assert answer_cache.lookup(ARGV, environ) is None


def test_a_racy_change_keeps_nothing(environ: dict[str, str], deps: list[str], tmp_path: Path) -> None:
    """A dependency changed after the computation began (or just before) may have been half seen."""
    began = time.time() - 1.0
    (tmp_path / "runtime.json").write_text('{"changed": true}\n')  # during the computation
    assert not _kept(environ, deps, began=began)
    assert not _file(environ).exists()
    began = time.time() + answer_cache.RACY_SECONDS / 2  # changed just before it began
    assert not _kept(environ, deps, began=began)
    assert _kept(environ, deps, began=time.time() + answer_cache.RACY_SECONDS + 0.05)


def test_a_named_worker_keeps_and_reads_nothing(environ: dict[str, str], deps: list[str]) -> None:
    named = {**environ, "SUPERFLUID_WORKER_LLAMACPP": "/opt/worker"}
    assert not _kept(named, deps)
    assert not _file(environ).exists()
    assert _kept(environ, deps)
    assert answer_cache.lookup(ARGV, named) is None
    empty = {**environ, "SUPERFLUID_WORKER_LLAMACPP": ""}  # empty means unset, as for the catalog
    assert _kept(empty, deps) and answer_cache.lookup(ARGV, empty) == OUTPUT


def test_only_the_kept_commands_are_kept(environ: dict[str, str], deps: list[str]) -> None:
    assert not _kept(environ, deps, argv=["runtime", "install", "basert"])
    assert answer_cache.lookup(["runtime", "install", "basert"], environ) is None
    assert answer_cache.lookup([], environ) is None


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", '{"runtimes --json": {"output": 3}}', "deep", "fifo", "link"])
def test_a_bad_cache_file_is_ignored_and_written_anew(environ: dict[str, str], deps: list[str], tmp_path: Path,
                                                      bad: str) -> None:
    path = _file(environ)
    path.parent.mkdir(parents=True)
    if bad == "fifo":
        os.mkfifo(path)  # an open that would never return
    elif bad == "link":
        (tmp_path / "elsewhere.json").write_text("{}")
        os.symlink(tmp_path / "elsewhere.json", path)
    else:
        path.write_text("[" * 100000 if bad == "deep" else bad)
    assert answer_cache.lookup(ARGV, environ) is None
    assert _kept(environ, deps)
    assert answer_cache.lookup(ARGV, environ) == OUTPUT
    if bad == "link":  # replaced, never written through
        assert (tmp_path / "elsewhere.json").read_text() == "{}" and not path.is_symlink()


def test_a_cache_folder_linked_out_of_the_home_is_not_written_through(environ: dict[str, str], deps: list[str],
                                                                      tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, Path(environ["SUPERFLUID_HOME"]) / "cache")
    assert not _kept(environ, deps)
    assert list(outside.iterdir()) == []


def test_a_few_command_lines_are_kept_at_once(environ: dict[str, str], deps: list[str]) -> None:
    for n in range(12):
        assert _kept(environ, deps, argv=["runtimes", *["--json"] * n])
    kept: dict[str, Any] = json.loads(_file(environ).read_text())["outputs"]
    assert len(kept) == 8 and " ".join(["runtimes", *["--json"] * 11]) in kept
    assert answer_cache.lookup(["runtimes", *["--json"] * 11], environ) == OUTPUT


SECRET = "s3cr3t-value-of-a-token"


def test_only_the_variables_that_change_the_answer_are_inputs(environ: dict[str, str], deps: list[str]) -> None:
    """Issue 36: a credential in the environment is no input and none of it is kept; the variables
    an answer depends on are inputs by a digest, never by value."""
    secret_env = {**environ, "GITHUB_TOKEN": SECRET, "HTTPS_PROXY": f"http://me:{SECRET}@proxy:3128",
                  "BASERT_LIB": "/opt/basert-private-path"}
    assert _kept(secret_env, deps)
    written = _file(environ).read_text()
    assert SECRET not in written and "/opt/basert-private-path" not in written
    assert "GITHUB_TOKEN" not in written and "HTTPS_PROXY" not in written
    assert answer_cache.lookup(ARGV, {**secret_env, "GITHUB_TOKEN": "another"}) == OUTPUT  # no input
    assert answer_cache.lookup(ARGV, {**secret_env, "BASERT_LIB": "/opt/other"}) is None  # an input
    assert answer_cache.lookup(ARGV, {**secret_env, "SUPERFLUID_HOST_GLIBC": "2.17"}) is None
    names = answer_vars()
    assert {"PATH", "LD_LIBRARY_PATH", "BASERT_LIB", "HOME"} <= set(names) and "GITHUB_TOKEN" not in names


def test_a_kept_file_of_the_old_shape_is_deleted(environ: dict[str, str], deps: list[str]) -> None:
    """Format 1 held every variable's value: the next command that reads it deletes it."""
    _file(environ).parent.mkdir(parents=True)
    old = {" ".join(ARGV): {"at": time.time(), "inputs": [1, "0.1.0", ARGV, [["GITHUB_TOKEN", SECRET]]],
                            "deps": [], "output": OUTPUT}}
    _file(environ).write_text(json.dumps(old))
    assert answer_cache.lookup(ARGV, environ) is None
    assert not _file(environ).exists()


def test_what_an_answer_about_the_runtimes_depends_on(environ: dict[str, str], sf_home: Path) -> None:
    """The home's installs to their files, the folders searched beside superfluid, paths the
    environment names, the host's probed files, and superfluid's own code and recipes."""
    import superfluid.runtime.basert.adapter  # noqa: F401  (a module the computation imports)
    from superfluid.catalog import shipped_dirs
    from superfluid.runtime.hostfacts.host import PROBED

    lib = sf_home / "runtimes" / "basert" / "0.4.0-cpu" / "lib"
    lib.mkdir(parents=True)
    (lib / "libbaseRT.so").write_bytes(b"")
    os.symlink("0.4.0-cpu", sf_home / "runtimes" / "basert" / "current")
    found = depends_on({**environ, "BASERT_LIB": "/opt/basert/lib:relative", "UNRELATED": "/etc"})
    assert str(lib / "libbaseRT.so") in found and str(sf_home / "runtimes" / "basert" / "current") in found
    assert str(sf_home / "runtimes") in found
    assert set(shipped_dirs()) <= set(found)
    assert "/opt/basert/lib" in found and "relative" not in found and "/etc" not in found
    assert set(PROBED) <= set(found)
    adapters = Path(superfluid.runtime.basert.adapter.__file__).parent
    assert str(adapters / "adapter.py") in found and str(adapters / "recipe.json") in found
    assert not any(p.endswith(".pyc") or p.endswith("__pycache__") for p in found)
    assert not any(p.startswith(str(sf_home / "cache")) for p in found) and str(sf_home) not in found
