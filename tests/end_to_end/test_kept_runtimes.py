"""``superfluid runtimes [--json]`` prints a kept answer while nothing it was computed from changed
(issue 13: its wall time), and a fresh one after any change a person or an installer makes.

Real installs from the loopback release server, the real console script, real libraries: after each
change the printed answer must be the one computed with no kept answer at all (the cache file
removed), and it must differ from the answer before where the change shows."""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import pytest

from superfluid import answer_cache
from tests import cli
from tests.cli import Run
from tests.end_to_end import releases
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def _runtimes(home: Home, *argv: str, env: dict[str, str] | None = None) -> tuple[Run, set[str]]:
    """``superfluid runtimes <argv>`` and the modules it imported."""
    done = cli.run("superfluid", "runtimes", *argv, env=env or home.env, timeout=60,
                   prefix=[cli.script("python"), "-X", "importtime"])
    modules = {m.group(1) for line in done.stderr.splitlines() if (m := _IMPORTED.match(line))}
    stderr = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    return Run(done.code, done.stdout, stderr), modules


def _computed(modules: set[str]) -> bool:
    """The answer was computed: the command asked the catalog and the adapters were imported. The registry
    loads an adapter with ``importlib.import_module``, which ``-X importtime`` does not report: the
    basert adapter shows by its ABI rule, which it imports at its top."""
    return "superfluid.catalog" in modules and "superfluid.runtime.basert.abi" in modules


def _fresh(home: Home, *argv: str, env: dict[str, str] | None = None) -> str:
    """The answer computed with nothing kept."""
    (home.path / "cache" / "outputs.json").unlink(missing_ok=True)
    run, modules = _runtimes(home, *argv, env=env)
    assert run.code == 0 and _computed(modules), run.stderr
    return run.stdout


def _settled() -> None:
    """Past the racy window: what was just written may be kept from now on."""
    time.sleep(answer_cache.RACY_SECONDS + 0.1)


def _basert(stdout: str) -> dict[str, Any]:
    rows: list[dict[str, Any]] = json.loads(stdout)
    return next(r for r in rows if r["id"] == "basert")


@pytest.mark.native
def test_a_kept_answer_is_the_computed_one_until_anything_changes(cli_home: Home, server: ReleaseServer) -> None:
    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url).code == 0
    _settled()
    first, modules = _runtimes(cli_home, "--json")
    assert first.code == 0 and _computed(modules), first.stderr
    again, modules = _runtimes(cli_home, "--json")
    assert again.code == 0 and again.stdout == first.stdout and again.stderr == ""
    assert not _computed(modules), "kept: neither the parser nor an adapter is imported"
    assert not {"ctypes", "superfluid.catalog"} & modules
    human, modules = _runtimes(cli_home)  # the table is its own command line: computed, then kept
    assert _computed(modules) and "0.4.0-cpu" in human.stdout
    assert _basert(first.stdout)["install"] == "0.4.0-cpu"

    # another install made current: the answer moves with it
    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, "--version",
                               "0.3.1").code == 0
    assert cli_home.superfluid("runtime", "use", "basert", "0.3.1-cpu").code == 0
    _settled()
    moved, modules = _runtimes(cli_home, "--json")
    assert _computed(modules) and _basert(moved.stdout)["install"] == "0.3.1-cpu"
    assert moved.stdout == _fresh(cli_home, "--json")

    # the current library overwritten in place by one of another ABI (same path, new bytes)
    _settled()
    kept, modules = _runtimes(cli_home, "--json")
    assert not _computed(modules) and kept.stdout == moved.stdout
    lib = cli_home.basert / "0.3.1-cpu" / "lib" / "libbaseRT.so"
    assert lib.is_file()
    lib.write_bytes(releases.engine_lib("0.5.0").read_bytes())
    _settled()
    swapped, modules = _runtimes(cli_home, "--json")
    assert _computed(modules) and _basert(swapped.stdout)["ready"] is not True
    assert swapped.stdout == _fresh(cli_home, "--json")

    # the environment names another library
    _settled()
    assert not _computed(_runtimes(cli_home, "--json")[1])
    named = {**cli_home.env, "BASERT_LIB": str(releases.engine_lib("0.4.0"))}
    other, modules = _runtimes(cli_home, "--json", env=named)
    assert _computed(modules) and _basert(other.stdout)["ready"] is True
    assert other.stdout == _fresh(cli_home, "--json", env=named)

    # every install removed
    assert cli_home.superfluid("runtime", "remove", "basert", "--all").code == 0
    _settled()
    gone, modules = _runtimes(cli_home, "--json")
    assert _computed(modules) and _basert(gone.stdout)["state"] != "ready" and "install" not in _basert(gone.stdout)
    assert gone.stdout == _fresh(cli_home, "--json")


@pytest.mark.native
def test_superfluid_changed_computes_anew(cli_home: Home, server: ReleaseServer) -> None:
    """A module of superfluid the answer came from changed (an upgrade, an edit in a checkout): here
    its change time moves (its times set to what they are), and nothing else."""
    import superfluid.commands.runtimes as module

    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url).code == 0
    _settled()
    _runtimes(cli_home, "--json")
    assert not _computed(_runtimes(cli_home, "--json")[1])
    assert module.__file__ is not None
    st = os.stat(module.__file__)
    os.utime(module.__file__, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _computed(_runtimes(cli_home, "--json")[1])


def test_a_failed_worker_keeps_nothing(cli_home: Home, tmp_path: Any) -> None:
    """A worker's failure is remembered for a minute only: an answer that holds one is not kept.

    The llama.cpp worker shipped beside superfluid (no worker named) is asked to check a library
    and given no time to answer; with time it answers, and that answer is kept."""
    lib = tmp_path / "libllama.so"
    lib.write_bytes(b"\x7fELF not a library")
    env = {**cli_home.env, "SUPERFLUID_LLAMA_LIB": str(lib)}
    _settled()
    hurried = {**env, "SUPERFLUID_WORKER_TIMEOUT": "0.001"}
    for _ in range(2):  # the failure, then the failure remembered
        run, modules = _runtimes(cli_home, "--json", env=hurried)
        assert _computed(modules), run.stderr
        row = json.loads(run.stdout)[1]
        assert row["id"] == "llamacpp" and row["state"] == "missing", row
    assert not (cli_home.path / "cache" / "outputs.json").exists()
    for kept in (False, True):
        run, modules = _runtimes(cli_home, "--json", env=env)
        assert json.loads(run.stdout)[1]["state"] == "broken" and _computed(modules) is not kept
