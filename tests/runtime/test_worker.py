"""``runtime/worker.run``: the worker command line every adapter shares — the declarations answered
from the adapter, the engine's commands passed to its handlers, anything else a usage error (2)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.process import start_worker, worker_env
from superfluid.runtime.worker import _takes_gate, check_handlers, run
from tests import cli
from tests.end_to_end import releases
from tests.loaded_modules import loaded

USAGE = "usage: superfluid-worker-basert <check|compat|options|versions> [flags]\n"


@pytest.fixture
def calls() -> list[list[str]]:
    return []


def handlers(calls: list[list[str]]) -> dict[str, object]:
    def check(argv: list[str]) -> int:
        calls.append(argv)
        return 1

    return {"check": check}


@pytest.mark.parametrize(("argv", "code", "out", "err"), [
    pytest.param([], 2, "", USAGE, id="nothing"),
    pytest.param(["serve"], 2, "", f"superfluid-worker-basert: unknown command 'serve'; {USAGE}", id="unknown"),
    pytest.param(["compat"], 2, "", "superfluid-worker-basert: compat takes exactly --json (got nothing)\n",
                 id="declaration-without-json"),
    pytest.param(["options", "--json", "-v"], 2, "",
                 "superfluid-worker-basert: options takes exactly --json (got --json -v)\n", id="declaration-more"),
])
def test_the_line(capsys: pytest.CaptureFixture[str], calls: list[list[str]], argv: list[str], code: int, out: str,
                  err: str) -> None:
    assert run(registry.get("basert"), argv, handlers(calls)) == code  # type: ignore[arg-type]
    assert capsys.readouterr() == (out, err) and calls == []


@pytest.mark.parametrize("word", ["--help", "-h", "help"])
def test_help_is_the_usage_then_each_command_examples_and_exit_codes(capsys: pytest.CaptureFixture[str],
                                                                    calls: list[list[str]], word: str) -> None:
    assert run(registry.get("basert"), [word], handlers(calls)) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert err == "" and out.startswith(USAGE) and calls == []
    assert "\n  check     [--model PATH]" in out and "\nexamples:\n  superfluid-worker-basert check\n" in out
    assert "\nexit codes:\n  0  done" in out and "  2  a usage error" in out and "  3  (serve)" not in out


def test_a_command_goes_to_its_handler_with_the_rest(calls: list[list[str]]) -> None:
    assert run(registry.get("basert"), ["check", "--lib", "/x"], handlers(calls)) == 1  # type: ignore[arg-type]
    assert calls == [["--lib", "/x"]]


def test_a_typed_error_of_a_handler_is_its_message_and_1(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(argv: list[str]) -> int:
        raise BadFile("/r.json", "not JSON")

    assert run(registry.get("basert"), ["check"], {"check": broken}) == 1
    assert capsys.readouterr().err == "superfluid-worker-basert: /r.json: not JSON\n"


@pytest.mark.parametrize("command", ["compat", "options", "versions"])
def test_a_declaration_is_one_compact_json_line(capsys: pytest.CaptureFixture[str], sf_home: Path,
                                                command: str) -> None:
    adapter = registry.get("basert")
    assert run(adapter, [command, "--json"], {}) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n") and out.count("\n") == 1
    doc = json.loads(out)
    assert out == json.dumps(doc, separators=(",", ":")) + "\n"
    if command == "compat":
        assert doc == adapter.compat()


def _check(available: bool | str) -> object:
    def check(argv: list[str], lookup: object) -> tuple[dict[str, object], int]:
        report = {"runtime": {"id": "basert", "version": "1.0" if available is True else None}, "available": available,
                  "argv": argv}
        return report, 0 if available is True else 1

    return check


@pytest.mark.parametrize(("available", "argv", "code", "out", "err"), [
    pytest.param(True, ["check", "--model", "/m"], 0,
                 '{"runtime":{"id":"basert","version":"1.0"},"available":true,"argv":["--model","/m"]}\n', "",
                 id="check"),
    pytest.param("nothing here", ["check"], 1,
                 '{"runtime":{"id":"basert","version":null},"available":"nothing here","argv":[]}\n', "",
                 id="check-unavailable"),
    pytest.param(True, ["version"], 0, "1.0\n", "", id="version"),
    pytest.param("nothing here", ["version"], 1, "", "superfluid-worker-basert: nothing here\n",
                 id="version-unavailable"),
])
def test_check_handlers_answer_check_and_version_from_one_check(capsys: pytest.CaptureFixture[str],
                                                                available: bool | str, argv: list[str], code: int,
                                                                out: str, err: str) -> None:
    handlers = check_handlers(_check(available))  # type: ignore[arg-type]
    assert run(registry.get("basert"), argv, handlers) == code
    assert capsys.readouterr() == (out, err)


@pytest.mark.parametrize("lib", ["engine", "empty"])
def test_a_primed_check_answers_whole_then_exits_with_its_code(lib: str, tmp_path: Path) -> None:
    """An install's probe: the worker started primed waits for stdin to close, checks, writes its
    whole report and exits with the check's code at once (its interpreter's teardown skipped: the
    installer waits for that code)."""
    folder = tmp_path / "lib"
    folder.mkdir()
    if lib == "engine":
        releases.build_engines()
        built = next(releases.native_cache().glob("basert/0.4.0/**/libbaseRT.so"), None)
        if built is None:
            pytest.skip("the reference engine is not built (scripts/build-native)")
        shutil.copy(built, folder / "libbaseRT.so")
    argv = [sys.executable, "-c", "import sys; from superfluid.runtime.basert.worker import main; sys.exit(main())",
            "check", "--lib", str(folder)]
    proc = start_worker(argv, env=worker_env(os.environ), primed=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.close()
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=60)
    report = json.loads(out)
    assert (report["available"] is True) is (lib == "engine"), err
    assert proc.returncode == (0 if lib == "engine" else 1)


#: modules only the worker's other commands run: a check (an install's probe) never imports them
_NOT_FOR_A_CHECK = ("superfluid.runtime.install_step", "superfluid.runtime.declaration",
                    "superfluid.runtime.hostfacts.host", "superfluid.runtime.planning",
                    "superfluid.runtime.kernel.receipt", "superfluid.runtime.kernel.record",
                    "superfluid.runtime.basert.adapter", "superfluid.runtime.basert.planner")

@pytest.mark.parametrize(("argv", "loads", "code"), [
    pytest.param(["check", "--lib", "{lib}"], (), 1, id="check"),  # an empty folder: the report says why
    pytest.param(["versions", "--json"], ("superfluid.runtime.declaration", "superfluid.runtime.hostfacts.host"), 0,
                 id="versions"),
    pytest.param(["plan", "--version", "0.0.1"], ("superfluid.runtime.install_step",), 1, id="plan"),
])
def test_a_worker_command_loads_its_own_module_only(argv: list[str], loads: tuple[str, ...], code: int,
                                                    tmp_path: Path, sf_home: Path) -> None:
    line = [a.replace("{lib}", str(tmp_path)) for a in argv]
    run = loaded("superfluid.runtime.basert.worker", line, cli.environment(sf_home))
    assert run.code == code
    assert set(loads) <= run.modules
    if argv[0] == "check":
        assert set(_NOT_FOR_A_CHECK) & run.modules == set()


def _serve_before_gates(argv: list[str], lookup: object, out: object) -> int:
    return 0


def _serve_gated(argv: list[str], lookup: object, out: object, gate: object = None) -> int:
    return 0


def _serve_gated_by_keyword(argv: list[str], lookup: object, out: object, *, gate: object = None) -> int:
    return 0


def test_an_engine_serve_written_before_the_gate_is_told_to_go_before_it_loads() -> None:
    """``SUPERFLUID_PRIMED=load`` hands the gate only to a ``serve`` that takes it (docs/adapters.md)."""
    assert not _takes_gate(_serve_before_gates)
    assert _takes_gate(_serve_gated) and _takes_gate(_serve_gated_by_keyword)
    assert not _takes_gate(print)  # no code to read: told to go first
