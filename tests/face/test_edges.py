"""The uneven edges of issue 25, each through the real CLI in a fresh home: a FIFO or a device named
as a model, filesystem faults that name the path at fault, what MLX needs off Apple silicon, a mirror
that refuses connections, the ``--json`` of every command, install names and ids as completion and
the commands take them, a second identical install."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

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
    assert str(fault).startswith(f"/srv/m/x: {os.strerror(code)}: ") and fault.fix and fault.fix.startswith(fix)
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
    assert "check that the server at 127.0.0.1:1 is running" in error["fix"] and "--offline" in error["fix"]


# -- the other programs' help pages, versions and JSON errors (item 10) ---------------------------


def _program(name: str, *argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    import subprocess

    from tests.conftest import VENV_BIN

    done = subprocess.run([str(VENV_BIN / name), *argv], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


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

    from superfluid.runtime.schema import errors

    code, out, err = _program("superfluid-manifest", *argv, env=cli_home.env)
    assert code == 2 and err.startswith("superfluid-manifest: "), err
    doc = json.loads(out)
    assert doc["error"]["code"] == "usage" and doc["error"]["exit"] == 2 and errors(doc, "error") == []
    assert doc["error"]["message"] in err


@pytest.mark.parametrize("worker", ["basert", "llamacpp", "mlx"])
def test_each_worker_help_has_commands_examples_and_exit_codes(cli_home: Home, worker: str) -> None:
    code, out, err = _program(f"superfluid-worker-{worker}", "--help", env=cli_home.env)
    assert code == 0 and err == "", err
    assert out.startswith(f"usage: superfluid-worker-{worker} <") and "\ncommands:\n  check " in out
    assert f"\nexamples:\n  superfluid-worker-{worker} check\n" in out
    assert "\nexit codes:\n  0  done" in out and "\n  2  a usage error" in out
    assert ("\n  3  (serve) the model did not load" in out) == (worker != "mlx")
