"""superfluid-worker-basert as a real subprocess: version, check (against the schema), usage errors."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from basert_helpers import LIB_NAME, WORKER, lib_path

from superfluid.runtime.basert.header import REQUIRES
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli

PROG = "superfluid-worker-basert"


def worker(env: dict[str, str], *args: str) -> cli.Run:
    assert WORKER.exists(), f"{WORKER} is missing: install the package (scripts/setup-env)"
    return cli.run(WORKER, *args, env=env, timeout=60)


def check(env: dict[str, str], *args: str) -> tuple[dict[str, Any], int]:
    done = worker(env, "check", *args)
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    report = json.loads(lines[0])
    assert schema_errors(report, "basert-check") == []
    return report, done.code


CHECKS = [
    pytest.param("0.3.0", 0, {"abi": None, "config_read": "by-value"}, None, id="0.3.0"),
    pytest.param("0.3.1", 0, {"abi": 1, "config_read": "by-value"}, None, id="0.3.1"),
    pytest.param("0.4.0", 0, {"abi": 1, "config_read": "into"}, None, id="0.4.0"),
    pytest.param("0.5.0", 1, {"stated": {"version": "0.5.0", "abi": 2}},
                 "states ABI 2; this superfluid drives ABI 1", id="0.5.0"),
    pytest.param("0.2.6", 1, {"stated": {"version": "0.2.6", "abi": None}},
                 "only the unnumbered 0.3.x line carries ABI 1", id="0.2.6"),
    pytest.param("missing-symbol", 1, {}, "lacks baseRT_decode_step", id="missing-symbol"),
    pytest.param("wrong-size", 1, {}, "in 1812 bytes where this superfluid expects 1792", id="wrong-size"),
]


@pytest.mark.parametrize(("variant", "code", "facts", "reason"), CHECKS)
def test_check_each_variant(engines: Path, clean_env: dict[str, str], variant: str, code: int,
                            facts: dict[str, Any], reason: str | None) -> None:
    path = lib_path(engines, variant)
    report, rc = check(clean_env, "--basert-lib", str(path.parent))
    assert rc == code
    assert report["requires"] == REQUIRES and report["unnumbered_line"] == "0.3"
    assert report["named"] == "--basert-lib"
    assert report["library"] == str(path)
    assert report["formats"][0]["id"] == "base"
    if reason is None:
        assert report["available"] is True
        assert report["runtime"] == {"id": "basert", "version": f"{variant} ({path})", "aliases": []}
        assert {k: report[k] for k in facts} == facts
        assert report["devices"] == []
    else:
        assert reason in report["available"] and str(path) in report["available"]
        assert report["runtime"]["version"] is None
        assert "abi" not in report and report["devices"] == []
        # an ABI verdict says what the library states; any other refusal (a fault) does not
        assert report.get("stated") == facts.get("stated")


def test_check_with_a_model(engines: Path, clean_env: dict[str, str], tiny_model: Path) -> None:
    report, rc = check(clean_env, "--model", str(tiny_model), "--basert-lib", str(lib_path(engines, "0.4.0")))
    assert rc == 0
    model = report["model"]
    assert model["path"] == str(tiny_model) and model["reads"] is True
    assert model["facts"] == {"architecture": "ref", "vocab_size": 15, "n_layers": 2, "dim": 64, "n_heads": 4,
                              "n_kv_heads": 4, "head_dim": 16, "ffn_dim": 256, "max_seq_len": 128}
    assert model["sizing"] == {"budget_bytes": 0, "trained_context": 128}


@pytest.mark.parametrize(("content", "reason"), [
    pytest.param(b"GGUF\0\0\0\0", "does not start with BASE", id="other-format"),
    pytest.param(b"BASE\2\0\0\0" + b"\0" * 80, "unsupported or truncated model header (INVALID_FORMAT)",
                 id="engine-refuses"),
    pytest.param(None, "is a directory", id="directory"),
])
def test_check_with_a_bad_model(engines: Path, clean_env: dict[str, str], tmp_path: Path,
                                content: bytes | None, reason: str) -> None:
    path = tmp_path / "m.base"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    report, rc = check(clean_env, "--model", str(path), "--basert-lib", str(lib_path(engines, "0.3.0")))
    assert rc == 1 and report["available"] is True
    assert reason in report["model"]["reads"] and "facts" not in report["model"]


def test_check_model_without_a_library(clean_env: dict[str, str], tiny_model: Path) -> None:
    report, rc = check(clean_env, "--model", str(tiny_model))
    assert rc == 1
    assert report["available"].startswith("libbaseRT not found (looked in ")
    assert report["fixes"][0]["argv"] == ["superfluid", "runtime", "install", "basert"]  # a value, not text
    assert "named" not in report and "library" not in report
    assert "no usable libbaseRT" in report["model"]["reads"]


def test_check_named_by_env(engines: Path, clean_env: dict[str, str]) -> None:
    report, rc = check({**clean_env, "BASERT_LIB": str(lib_path(engines, "0.3.1"))})
    assert rc == 0 and report["named"] == "BASERT_LIB" and report["abi"] == 1


def test_check_from_the_current_install(engines: Path, clean_env: dict[str, str]) -> None:
    home = Path(clean_env["SUPERFLUID_HOME"])
    lib_dir = home / "runtimes" / "basert" / "0.4.0-cpu" / "lib"
    lib_dir.mkdir(parents=True)
    shutil.copy(lib_path(engines, "0.4.0"), lib_dir / LIB_NAME)
    os.symlink("0.4.0-cpu", home / "runtimes" / "basert" / "current")
    report, rc = check(clean_env)
    assert rc == 0 and "named" not in report
    assert report["library"] == str(home / "runtimes" / "basert" / "current" / "lib" / LIB_NAME)


def test_devices_from_the_engine_budget(engines: Path, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "BASERT_REF_DEVICE_BUDGET": "8000000000", "SUPERFLUID_HOST_OS": "linux"}
    report, rc = check(env, "--basert-lib", str(lib_path(engines, "0.4.0")))
    assert rc == 0 and report["devices"] == [{"backend": "CUDA", "name": "GPU", "memory": 8000000000}]


def test_version(engines: Path, clean_env: dict[str, str]) -> None:
    path = lib_path(engines, "0.4.0")
    done = worker(clean_env, "version", "--basert-lib", str(path))
    assert (done.code, done.stdout, done.stderr) == (0, f"0.4.0 ({path})\n", "")


def test_version_refused(engines: Path, clean_env: dict[str, str]) -> None:
    done = worker(clean_env, "version", "--basert-lib", str(lib_path(engines, "0.5.0")))
    assert done.code == 1 and done.stdout == ""
    assert done.stderr.startswith(f"{PROG}: libbaseRT at ") and "states ABI 2" in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["check", "--x"], "unknown flag --x", id="unknown-flag"),
    pytest.param(["check", "--model"], "--model needs a value", id="no-value"),
    pytest.param(["check", "--model", "a", "--model", "b"], "--model is given twice", id="twice"),
    pytest.param(["check", "stray"], "unexpected argument 'stray'", id="positional"),
    pytest.param(["check", "--kv-bits", "3"], "--kv-bits '3': expected one of", id="bad-kv-bits"),
    pytest.param(["version", "--model", "m"], "unknown flag --model", id="version-takes-no-model"),
    pytest.param(["frobnicate"], "unknown command 'frobnicate'", id="unknown-command"),
])
def test_usage_errors_exit_2(clean_env: dict[str, str], args: list[str], message: str) -> None:
    done = worker(clean_env, *args)
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.startswith(f"{PROG}: {message}")


def test_no_command_exits_2(clean_env: dict[str, str]) -> None:
    done = worker(clean_env)
    assert done.code == 2 and done.stderr.startswith(f"usage: {PROG} ")


@pytest.mark.parametrize(("form", "named"), [
    (["--basert-lib={}"], "--basert-lib"),
    (["--lib", "{}"], "--lib"),  # "named" is the flag as given (issue 15), not its other spelling
    (["--lib={}"], "--lib"),
    (["--kv-bits", "8", "--basert-lib", "{}"], "--basert-lib"),
    (["--basert-kv-bits", "8", "--basert-lib", "{}"], "--basert-lib"),  # serve's spelling, as the face forwards it
])
def test_flag_forms(engines: Path, clean_env: dict[str, str], form: list[str], named: str) -> None:
    path = lib_path(engines, "0.3.0")
    report, rc = check(clean_env, *(a.format(path) for a in form))
    assert rc == 0 and report["named"] == named
    assert schema_errors(report, "basert-check") == []


@pytest.mark.parametrize("flag", ["--lib", "--basert-lib"])
def test_a_missing_library_is_named_by_the_flag_given(clean_env: dict[str, str], tmp_path: Path, flag: str) -> None:
    report, rc = check(clean_env, flag, str(tmp_path / "nope"))
    assert rc == 1 and report["named"] == flag
    assert report["available"].startswith(f"{flag} names {tmp_path / 'nope'}, which does not exist")


def test_linked_check_equals_the_worker(engines: Path, clean_env: dict[str, str], tiny_model: Path) -> None:
    """The face asks basert in process; it must answer exactly what the worker prints."""
    from superfluid.runtime.registry import get

    args = ["--basert-lib", str(lib_path(engines, "0.3.1")), "--model", str(tiny_model)]
    assert get("basert").check(args, read(clean_env)) == check(clean_env, *args)
