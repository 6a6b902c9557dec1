"""Declarations in process (issue 8, item 4): ``compat``, ``versions`` and ``options`` come from the
adapters in the ``superfluid`` process, only ``check`` goes to a worker, and only when there is
something for it to load; a worker named by ``SUPERFLUID_WORKER_<ID>`` is still asked first."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests import cli
from tests.declarations.conftest import LINUX_X64, MACOS_ARM64, SUPERFLUID, fake_worker, sf_json, validate
from tests.declarations.conftest import empty_home_env as _empty_home_env

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None, reason="strace is not installed (apt-get install strace)")

#: the four commands asked on every run that must start no worker on a home with nothing installed
COMMANDS = [
    pytest.param(["runtimes", "--json"], id="runtimes"),
    pytest.param(["runtime", "versions", "llamacpp", "--json"], id="versions-llamacpp"),
    pytest.param(["runtime", "options", "llamacpp", "--json"], id="options-llamacpp"),
    pytest.param(["compat", "--json"], id="compat"),
]
_EXECVE = re.compile(r'execve\("([^"]+)"')


def _traced(env: dict[str, str], trace: Path, *args: str) -> tuple[cli.Run, list[str]]:
    """Run the real ``superfluid`` under ``strace -f -e trace=execve``; (the run, every path execve'd)."""
    assert STRACE is not None
    done = cli.run(SUPERFLUID, *args, env=env, prefix=[STRACE, "-f", "-qq", "-e", "trace=execve", "-o", trace])
    return done, _EXECVE.findall(trace.read_text())


def _workers(paths: list[str]) -> list[str]:
    return [p for p in paths if os.path.basename(p).startswith("superfluid-worker-")]


@needs_strace
@pytest.mark.parametrize("host", [pytest.param(LINUX_X64, id="linux-x64"), pytest.param(MACOS_ARM64, id="macos-arm64")])
@pytest.mark.parametrize("args", COMMANDS)
def test_no_worker_starts_on_an_empty_home(home: Path, tmp_path: Path, args: list[str], host: dict[str, str]) -> None:
    done, paths = _traced(_empty_home_env(home, host), tmp_path / "trace", *args)
    assert done.code == 0, done.stderr
    assert paths and paths[0] == str(SUPERFLUID), paths  # the trace saw the command itself
    assert _workers(paths) == []
    json.loads(done.stdout)


@needs_strace
def test_a_library_to_check_starts_its_worker_once_and_then_none(home: Path, tmp_path: Path) -> None:
    """The counter above counts: a named libllama is something to load, so its worker (and only it)
    starts, once; the next run repeats no check (SPEC §6.3)."""
    fake = tmp_path / "libllama.so"
    fake.write_bytes(b"not an ELF file")
    env = dict(_empty_home_env(home, LINUX_X64), SUPERFLUID_LLAMA_LIB=str(fake))
    done, paths = _traced(env, tmp_path / "trace-1", "runtimes", "--json")
    assert done.code == 0, done.stderr
    assert _workers(paths) == [str(SUPERFLUID.parent / "superfluid-worker-llamacpp")]
    row = {r["id"]: r for r in json.loads(done.stdout)}["llamacpp"]
    assert str(fake) in row["ready"]
    done, paths = _traced(env, tmp_path / "trace-2", "runtimes", "--json")
    assert done.code == 0, done.stderr
    assert _workers(paths) == []
    assert {r["id"]: r for r in json.loads(done.stdout)}["llamacpp"] == row


@pytest.mark.parametrize("host", [pytest.param(LINUX_X64, id="linux-x64"), pytest.param(MACOS_ARM64, id="macos-arm64")])
@pytest.mark.parametrize("runtime_id", ["llamacpp", "mlx"])
def test_a_row_judged_in_process_says_what_the_worker_says(home: Path, runtime_id: str,
                                                           host: dict[str, str]) -> None:
    env = _empty_home_env(home, host)
    rows = sf_json(env, "runtimes", "--json")
    validate(rows, "runtimes")
    row = {r["id"]: r for r in rows}[runtime_id]
    worker = SUPERFLUID.parent / f"superfluid-worker-{runtime_id}"
    done = cli.run(worker, "check", env=env, timeout=60)
    assert done.code == 1, done.stderr
    report = json.loads(done.stdout)
    assert isinstance(report["available"], str)
    assert row["ready"] == report["available"]
    assert row["state"] == "not installed"
    assert row["worker"] == {"path": str(worker), "source": "beside superfluid"}
    assert "installable" in row and row["options"]


#: a worker standing in for llamacpp's, recording each command line it is asked
RECORDING = """
with open(os.environ["FAKE_RECORD"], "a") as f:
    f.write(" ".join(args) + "\\n")
if args == ["versions", "--json"]:
    print(json.dumps([{"version": "b99999", "installs": True, "install": "b99999-cpu", "installed": False,
                       "tested": True, "layout": "v9"}]))
elif args == ["options", "--json"]:
    print(json.dumps([{"name": "threads", "type": "int", "description": "threads", "default": 1}]))
elif args == ["compat", "--json"]:
    print(json.dumps({"tested": [{"build": "b99999", "layout": "v2"}], "options": []}))
elif args[:1] == ["check"]:
    print(json.dumps({"runtime": {"id": "llamacpp", "version": "fake"}, "available": "a fake worker"}))
    sys.exit(1)
else:
    sys.exit(2)
"""


def test_a_named_worker_is_still_asked_for_everything(home: Path, tmp_path: Path) -> None:
    record = tmp_path / "asked"
    worker = fake_worker(tmp_path / "recording-llamacpp", RECORDING)
    env = dict(_empty_home_env(home, LINUX_X64), SUPERFLUID_WORKER_LLAMACPP=str(worker), FAKE_RECORD=str(record))

    rows = {r["id"]: r for r in sf_json(env, "runtimes", "--json")}
    assert rows["llamacpp"]["ready"] == "a fake worker"
    assert rows["llamacpp"]["worker"] == {"path": str(worker), "source": "environment"}
    assert rows["llamacpp"]["installable"] == "b99999-cpu"
    assert [o["name"] for o in rows["llamacpp"]["options"]] == ["threads"]
    assert [r["version"] for r in sf_json(env, "runtime", "versions", "llamacpp", "--json")] == ["b99999"]
    assert [o["name"] for o in sf_json(env, "runtime", "options", "llamacpp", "--json")] == ["threads"]
    assert sf_json(env, "compat", "--json")["runtimes"]["llamacpp"]["tested"][0]["build"] == "b99999"
    assert record.read_text().splitlines() == ["check", "versions --json", "options --json", "versions --json",
                                               "options --json", "compat --json"]

    # asked again: its declarations each time (not cached), its check not (nothing it depends on changed)
    sf_json(env, "runtimes", "--json")
    assert record.read_text().splitlines()[6:] == ["versions --json", "options --json"]


def test_declarations_answer_without_any_worker(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No worker anywhere: the declarations still answer (in process); the check cannot, and the row
    says the worker is missing, as before."""
    from superfluid import catalog
    from superfluid.commands import runtimes

    monkeypatch.setattr(catalog, "shipped_dirs", lambda: [str(tmp_path / "nowhere")])
    env = _empty_home_env(home, LINUX_X64)
    versions, code, ref = catalog.answer("llamacpp", ["versions", "--json"], env)
    assert (code, ref) == (0, None) and [v["version"] for v in versions] == ["b11642", "b11284"]
    part, _, ref = catalog.answer("mlx", ["compat", "--json"], env)
    assert ref is None and part["platforms"] == ["macos-arm64"]
    row = runtimes.row("llamacpp", env)
    assert row["state"] == "missing" and "superfluid-worker-llamacpp" not in row.get("worker", {})
    assert "not found (looked in" in row["ready"] and row["installable"] == "b11642-cpu"


# -- what each adapter finds to load, without loading it (llamacpp's and mlx's: tests/<id>/test_adapter.py) --


def test_basert_checks_in_process_and_knows_of_nothing_to_skip() -> None:
    from superfluid import catalog
    from superfluid.runtime.basert.adapter import ADAPTER
    from superfluid.runtime.kernel.lookup import read

    assert ADAPTER.linked and ADAPTER.nothing_to_load(read({}), "/nowhere/superfluid-worker-basert") is None
    assert catalog.nothing_to_load("basert", None, {}) is None
    named = catalog.WorkerRef("/x/superfluid-worker-llamacpp", "environment")
    assert catalog.nothing_to_load("llamacpp", named, {"SUPERFLUID_HOME": "/nonexistent"}) is None


# -- recipes: validated once per content ------------------------------------------------------------


def test_a_recipe_is_validated_once_per_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from superfluid.runtime.adapter import load_recipe
    from superfluid.runtime.kernel import schema
    from superfluid.runtime.kernel.errors import BadFile
    from superfluid.runtime.llamacpp.adapter import ADAPTER

    good = dict(ADAPTER.recipe)  # read before the home is set: only the fake recipe is stamped there
    monkeypatch.setenv("SUPERFLUID_HOME", str(tmp_path / "home"))
    pkg = tmp_path / "lib" / "fake_recipe_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.delitem(sys.modules, "fake_recipe_pkg", raising=False)
    (pkg / "recipe.json").write_text(json.dumps(good))
    assert load_recipe("fake_recipe_pkg", "llamacpp-recipe") == good
    stamps = list((tmp_path / "home" / "cache" / "validated").iterdir())
    assert len(stamps) == 1 and stamps[0].name.startswith("llamacpp-recipe-")

    calls: list[str] = []
    real = schema.validate
    monkeypatch.setattr(schema, "validate", lambda *a: (calls.append(a[1]), real(*a))[1])
    assert load_recipe("fake_recipe_pkg", "llamacpp-recipe") == good
    assert calls == []  # stamped: the schema library is not asked again
    (pkg / "recipe.json").write_text(json.dumps(dict(good, tested="b1")))
    with pytest.raises(BadFile, match=r"recipe.json at \$.tested"):
        load_recipe("fake_recipe_pkg", "llamacpp-recipe")
    assert calls == ["llamacpp-recipe"]
    (pkg / "recipe.json").write_text("{not json")
    with pytest.raises(BadFile, match="not a readable JSON recipe"):
        load_recipe("fake_recipe_pkg", "llamacpp-recipe")
