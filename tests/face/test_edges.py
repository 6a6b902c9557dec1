"""The uneven edges of issue 25, each through the real CLI in a fresh home: a FIFO or a device named
as a model, filesystem faults that name the path at fault, what MLX needs off Apple silicon, a mirror
that refuses connections, the ``--json`` of every command, install names and ids as completion and
the commands take them, a second identical install."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from superfluid.runtime import registry
from tests.conftest import Home

TINY = Path(os.environ.get("SUPERFLUID_NATIVE_CACHE") or Path(__file__).resolve().parents[2] / ".cache" / "native") \
    / "basert" / "models" / "tiny.base"


# -- a model that is not a regular file is refused at once, never read (item 7) ---------------------


def _fifo(tmp: Path) -> tuple[str, str]:
    os.mkfifo(tmp / "model.base")
    return str(tmp / "model.base"), "is a FIFO"


def _directory(tmp: Path) -> tuple[str, str]:
    (tmp / "model.base").mkdir()
    return str(tmp / "model.base"), "is a directory, and basert reads a model file"


def _device(tmp: Path) -> tuple[str, str]:
    return "/dev/zero", "is a character device"


NOT_A_FILE = [pytest.param(_fifo, id="fifo"), pytest.param(_directory, id="directory"),
              pytest.param(_device, id="device")]
MODEL_COMMANDS = [
    pytest.param(["serve", "--runtime", "basert", "--port", "0", "--model"], id="serve-runtime"),
    pytest.param(["runtime", "check", "basert", "--model"], id="check"),
    pytest.param(["runtime", "check", "basert", "--json", "--model"], id="check-json"),
]


@pytest.mark.parametrize("argv", MODEL_COMMANDS)
@pytest.mark.parametrize("make", NOT_A_FILE)
def test_a_model_that_is_not_a_regular_file_is_refused_at_once(cli_home: Home, tmp_path: Path, argv: list[str],
                                                               make: Callable[[Path], tuple[str, str]]) -> None:
    model, why = make(tmp_path)
    run = cli_home.superfluid(*argv, model, timeout=20)  # a FIFO that was opened would hang to the timeout
    assert run.code == 2, run.stderr
    assert f"--model {model} {why}" in run.stderr, run.stderr
    if "--json" in argv:
        assert run.json()["error"]["code"] == "usage" and run.json()["error"]["exit"] == 2
    assert not (cli_home.path / "runtimes").exists()


@pytest.mark.parametrize("make", [pytest.param(_fifo, id="fifo"), pytest.param(_device, id="device")])
def test_serve_without_runtime_refuses_a_fifo_before_probing(cli_home: Home, tmp_path: Path,
                                                            make: Callable[[Path], tuple[str, str]]) -> None:
    model, why = make(tmp_path)
    run = cli_home.superfluid("serve", "--port", "0", "--model", model, timeout=20)
    assert run.code == 2 and f"--model {model} {why}, not a model" in run.stderr, run.stderr


def test_a_real_model_still_passes_the_path_check(cli_home: Home) -> None:
    run = cli_home.superfluid("serve", "--port", "0", "--model", str(TINY), timeout=60)
    assert run.code == 4, run.stderr  # got past the path to the runtime, which is not installed here
    assert "--model" not in run.stderr


# -- a filesystem fault no typed error named still says which path and what to look at (item 8) ----


@pytest.mark.parametrize(("errno_name", "fix"), [
    pytest.param("ENOSPC", "free space on the file system holding /srv/m/x", id="no-space"),
    pytest.param("EACCES", "check the permissions of /srv/m/x", id="permissions"),
    pytest.param("EEXIST", "something else is at /srv/m/x", id="in-the-way"),
    pytest.param("ENOTDIR", "something else is at /srv/m/x", id="under-a-file"),
])
def test_the_face_words_a_filesystem_fault_by_its_kind(errno_name: str, fix: str) -> None:
    import errno

    from superfluid.cli import _os_fault

    code = getattr(errno, errno_name)
    fault = _os_fault(OSError(code, os.strerror(code), "/srv/m/x"))
    assert str(fault).startswith(f"/srv/m/x: {os.strerror(code)}: ") and (fault.advice or "").startswith(fix)
    assert fault.fixes == ()  # advice, not a command
    assert "SUPERFLUID_HOME" not in str(fault)


# -- network and platform refusals say what is needed and what to do next (item 9) ---------------


@pytest.mark.parametrize("argv", [
    pytest.param(["runtime", "install", "mlx"], id="install"),
    pytest.param(["runtime", "install", "mlx", "--dry-run", "--offline"], id="dry-run-offline"),
    pytest.param(["lock", "--runtime", "mlx", "--platform", "macos-arm64", "--backend", "metal"], id="lock-for-a-mac"),
])
def test_mlx_says_what_it_needs(cli_home: Home, tmp_path: Path, argv: list[str]) -> None:
    out = ["-o", str(tmp_path / "x.lock")] if argv[0] == "lock" else []
    run = cli_home.superfluid(*argv, *out)
    assert run.code == 1, run.stderr
    assert "runs on Apple silicon only (macos-arm64)" in run.stderr and "--mlx-venv" in run.stderr, run.stderr
    assert "recipe names no releases repository" not in run.stderr and "this is Linux" not in run.stderr
    assert not (tmp_path / "x.lock").exists()


def test_a_mirror_that_refuses_connections_names_the_next_step(cli_home: Home) -> None:
    import time

    began = time.monotonic()
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", "http://127.0.0.1:1/", "--json")
    assert run.code == 1 and time.monotonic() - began < 6, run.stderr  # refused is not retried for seconds
    error = run.json()["error"]
    assert "connection refused by 127.0.0.1:1" in error["message"]
    assert "check that the server at 127.0.0.1:1 is running" in error["advice"] and "--offline" in error["advice"]
    assert "fix" not in error  # the next step is the user's to take: prose, no command to paste


# -- the other programs' help pages, versions and JSON errors (item 10) ---------------------------


def _program(name: str, *argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    from tests import cli

    done = cli.run(name, *argv, env=env, timeout=60)
    return done.code, done.stdout, done.stderr


@pytest.mark.parametrize("page", [[], ["serve"], ["export"], ["check"]], ids=["top", "serve", "export", "check"])
def test_superfluid_manifest_help_has_examples_and_exit_codes(cli_home: Home, page: list[str]) -> None:
    code, out, err = _program("superfluid-manifest", *page, "--help", env=cli_home.env)
    assert code == 0 and err == "", err
    examples = out[out.index("\nexamples:\n"):out.index("\nexit codes:\n")]
    assert examples.count("\n  superfluid-manifest ") >= 2 or "gunicorn" in examples, out
    assert "\n  0  done" in out and "\n  1  " in out and "\n  2  a usage error" in out


def test_superfluid_manifest_version(cli_home: Home) -> None:
    from superfluid import __version__

    for flag in ("--version", "-V"):
        assert _program("superfluid-manifest", flag, env=cli_home.env) == (0, f"superfluid-manifest {__version__}\n",
                                                                            "")


@pytest.mark.parametrize("argv", [["check", "--nope", "--json"], ["check", "--json"]],
                         ids=["unknown-flag", "no-source"])
def test_superfluid_manifest_json_failures_are_the_json_error(cli_home: Home, argv: list[str]) -> None:
    import json

    from superfluid.runtime.kernel.schema import errors

    code, out, err = _program("superfluid-manifest", *argv, env=cli_home.env)
    assert code == 2 and err.startswith("superfluid-manifest: "), err
    doc = json.loads(out)
    assert doc["error"]["code"] == "usage" and doc["error"]["exit"] == 2 and errors(doc, "error") == []
    assert doc["error"]["message"] in err


@pytest.mark.parametrize("worker", registry.IDS)
def test_each_worker_help_has_commands_examples_and_exit_codes(cli_home: Home, worker: str) -> None:
    code, out, err = _program(f"superfluid-worker-{worker}", "--help", env=cli_home.env)
    assert code == 0 and err == "", err
    assert out.startswith(f"usage: superfluid-worker-{worker} <") and "\ncommands:\n  check " in out
    assert f"\nexamples:\n  superfluid-worker-{worker} check\n" in out
    assert "\nexit codes:\n  0  done" in out and "\n  2  a usage error" in out
    assert ("\n  3  (serve) the model did not load" in out) == (worker != "mlx")


# -- every command's --json, one word for one fact, an alias as an id, a second install (item 10) --



@pytest.fixture
def two_installs(cli_home: Home, mirror: Path) -> Home:
    for version in ("0.3.1", "0.4.0"):
        run = cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror), "--version", version)
        assert run.code == 0, run.stderr
    return cli_home


def _valid(doc: object, schema: str) -> None:
    from superfluid.runtime.kernel.schema import errors

    assert errors(doc, schema) == []


@pytest.mark.parametrize("argv", [["version", "--json"], ["--version", "--json"]], ids=["version", "flag"])
def test_version_json(cli_home: Home, argv: list[str]) -> None:
    from superfluid import __version__

    run = cli_home.superfluid(*argv)
    assert run.code == 0 and run.json() == {"superfluid": __version__}, run.stderr
    _valid(run.json(), "version")


def test_runtime_use_json(two_installs: Home) -> None:
    pinned = two_installs.superfluid("runtime", "use", "basert", "0.3.1-cpu", "--json")
    assert pinned.code == 0 and pinned.json() == {"id": "basert", "current": "0.3.1-cpu", "pinned": "0.3.1-cpu",
                                                  "state": "ready"}
    auto = two_installs.superfluid("runtime", "use", "basert", "--auto", "--json")
    assert auto.code == 0 and auto.json() == {"id": "basert", "current": "0.4.0-cpu", "pinned": None,
                                              "state": "ready"}
    for run in (pinned, auto):
        _valid(run.json(), "use-result")
    missing = two_installs.superfluid("runtime", "use", "basert", "9.9.9-cpu", "--json")
    assert missing.code == 1 and missing.json()["error"]["code"] == "no-such-install"


def test_lock_json_written_up_to_date_and_checked(cli_home: Home, mirror: Path, tmp_path: Path) -> None:
    lock = tmp_path / "superfluid.lock"
    line = ["lock", "--runtime", "basert", "--platform", "linux-x64", "--backend", "cpu", "--mirror", str(mirror),
            "-o", str(lock), "--json"]
    written = cli_home.superfluid(*line)
    assert written.code == 0, written.stderr
    doc = written.json()
    _valid(doc, "lock-result")
    assert (doc["written"], doc["up_to_date"], doc["check"]) == (True, False, False)
    assert [e["install"] for e in doc["engines"]] == ["0.4.0-cpu"] and doc["engines"][0]["abi"] == 1
    import hashlib

    assert doc["sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    again = cli_home.superfluid(*line)
    assert again.code == 0 and (again.json()["written"], again.json()["up_to_date"]) == (False, True)
    assert again.json()["sha256"] == doc["sha256"]
    checked = cli_home.superfluid("lock", "--check", "-o", str(lock), "--mirror", str(mirror), "--json")
    assert checked.code == 0 and checked.json()["up_to_date"] is True and checked.json()["changes"] == []
    pinned = doc["engines"][0]["files"][0]["sha256"]
    lock.write_text(lock.read_text().replace(pinned, "0" * 64))  # the release "changed under its name"
    outdated = cli_home.superfluid("lock", "--check", "-o", str(lock), "--mirror", str(mirror), "--json")
    assert outdated.code == 1, outdated.stderr
    report = outdated.json()  # one document: the changes and the error
    _valid(report, "lock-result")
    assert report["up_to_date"] is False and report["error"]["code"] == "lock-outdated"
    assert [c["kind"] for c in report["changes"]] == ["digest"] and report["changes"][0]["error"] is True
    assert outdated.stderr.startswith(f"superfluid: {lock} does not match")
    text = lock.read_text()
    lock.write_text(text[:text.index("[[engine]]")])  # an engine to add: the fix is a command
    moved = cli_home.superfluid("lock", "--check", "-o", str(lock), "--mirror", str(mirror), "--json")
    assert moved.code == 1 and [c["kind"] for c in moved.json()["changes"]] == ["new"]
    fix = f"superfluid lock --upgrade -o {lock} --mirror {mirror}"  # the lock and the --mirror given, kept
    assert moved.json()["error"]["fix"] == fix and moved.stderr.rstrip().endswith(f"`{fix}` writes the new choice")


def test_check_of_a_garbage_model_names_the_model_not_the_runtime(cli_home: Home, engines: Path,
                                                                  tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.base"
    garbage.write_bytes(b"not a model at all\n")
    run = cli_home.superfluid("runtime", "check", "basert", "--model", str(garbage), "--json", "--basert-lib",
                              str(engines / "0.4.0" / "libbaseRT.so"))
    assert run.code == 1, run.stderr
    report = run.json()
    assert report["available"] is True  # the runtime is; the model is what fails
    assert report["error"]["code"] == "model-unreadable" and "is not a baseRT model" in report["error"]["message"]
    _valid(report, "basert-check")
    unavailable = cli_home.superfluid("runtime", "check", "basert", "--model", str(garbage), "--json")
    assert unavailable.code == 1 and unavailable.json()["available"] is not True
    assert unavailable.json()["error"]["code"] == "not-available"


def test_repair_of_a_missing_install_is_no_such_install_as_remove_says(two_installs: Home) -> None:
    codes = {sub: two_installs.superfluid("runtime", sub, "basert", "9.9.9-cpu", "--json") for sub in ("repair",
                                                                                                       "remove")}
    for sub, run in codes.items():
        assert run.code == 1 and run.json()["error"]["code"] == "no-such-install", (sub, run.stdout)
    assert two_installs.installs() == ["0.3.1-cpu", "0.4.0-cpu"]


@pytest.mark.parametrize("argv", [
    pytest.param(["runtime", "versions", "llama.cpp", "--json"], id="versions"),
    pytest.param(["runtime", "options", "llama-cpp", "--json"], id="options"),
    pytest.param(["runtime", "check", "llama.cpp", "--json"], id="check"),
    pytest.param(["runtime", "check", "llama.cpp", "--help"], id="check-help"),
    pytest.param(["runtime", "install", "llama.cpp", "--dry-run", "--offline"], id="install"),
    pytest.param(["runtime", "use", "llama.cpp", "--auto"], id="use"),
    pytest.param(["serve", "--runtime", "llama.cpp", "--port", "0", "--model", str(TINY)], id="serve"),
])
def test_llama_cpp_is_an_id_wherever_one_is_taken(cli_home: Home, argv: list[str]) -> None:
    canonical = [("llamacpp" if a in ("llama.cpp", "llama-cpp") else a) for a in argv]
    alias, same = cli_home.superfluid(*argv), cli_home.superfluid(*canonical)
    assert "no runtime 'llama" not in alias.stderr, alias.stderr
    assert (alias.code, alias.stdout) == (same.code, same.stdout)
    assert not (cli_home.path / "runtimes" / "llama.cpp").exists()


def test_the_check_report_still_names_its_aliases(cli_home: Home) -> None:
    report = cli_home.superfluid("runtime", "check", "llamacpp", "--json").json()
    assert report["runtime"]["aliases"] == ["llama.cpp", "llama-cpp"]


def first_json_source(home: Home, mirror: Path) -> str:
    """The ``source`` an install from ``mirror`` reports (a dry run's: where the plans were listed)."""
    return str(home.superfluid("runtime", "install", "basert", "--mirror", str(mirror), "--dry-run", "--json")
               .json()["source"])


def test_a_second_identical_install_is_already_installed(cli_home: Home, mirror: Path) -> None:
    first = cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror))
    assert first.code == 0, first.stderr
    receipt, lib = cli_home.receipt("0.4.0-cpu"), cli_home.basert / "0.4.0-cpu" / "lib" / "libbaseRT.so"
    inode = lib.stat().st_ino
    again = cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror))
    assert again.code == 0, again.stderr
    assert "basert 0.4.0-cpu is already installed from the same archive" in again.stdout
    assert "--reinstall" in again.stdout
    assert "installing" not in again.stderr  # nothing was fetched or extracted
    assert cli_home.receipt("0.4.0-cpu") == receipt and lib.stat().st_ino == inode
    as_json = cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror), "--json")
    assert as_json.code == 0 and as_json.json()["already_installed"] is True
    _valid(as_json.json(), "install-result")
    assert as_json.json()["source"] == first_json_source(cli_home, mirror)  # where it was listed, as any install
    forced = cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror), "--reinstall")
    assert forced.code == 0 and "replacing the one of that name" in forced.stderr + forced.stdout, forced.stderr
    assert lib.stat().st_ino != inode and cli_home.installs() == ["0.4.0-cpu"]
    other = cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror), "--version", "0.3.1")
    assert other.code == 0 and "already installed" not in other.stdout  # another build is not the same install
