"""``runtime/basert/check``, in process: the devices an engine's budget means, the model part of a
report, the flags of ``check`` and the report's verdict for each reference engine. (The worker's
``check`` as a program, against its schema, is ``test_worker.py``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from basert_helpers import lib_path

from superfluid.runtime.basert.check import check_argv, check_report, devices, kv_bits_flag, lib_flag, model_report
from superfluid.runtime.hostfacts import host
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.lookup import read


class _Budget:
    def __init__(self, budget: int) -> None:
        self.budget = budget

    def device_memory_budget(self) -> int:
        return self.budget


@pytest.mark.parametrize(("budget", "os_name", "want"), [
    (0, "linux", []),
    (-1, "macos", []),
    (8 << 30, "macos", [{"backend": "Metal", "name": "Apple silicon GPU", "memory": 8 << 30}]),
    (24 << 30, "linux", [{"backend": "CUDA", "name": "GPU", "memory": 24 << 30}]),
])
def test_devices_are_the_engines_budget(budget: int, os_name: str, want: list[dict[str, Any]]) -> None:
    assert devices(_Budget(budget), os_name) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(("flags", "want"), [
    ({}, None), ({"--basert-lib": "/a"}, "/a"), ({"--lib": "/b"}, "/b"), ({"--model": "m"}, None),
])
def test_lib_flag(flags: dict[str, str], want: str | None) -> None:
    assert lib_flag(flags) == want


def test_lib_flag_refuses_both_spellings() -> None:
    with pytest.raises(UsageError, match="--basert-lib and --lib name the same library: give one"):
        lib_flag({"--basert-lib": "/a", "--lib": "/b"})


@pytest.mark.parametrize(("given", "want"), [(None, "0"), ("8", "8"), ("84", "84")])
def test_kv_bits_flag(given: str | None, want: str) -> None:
    assert kv_bits_flag({} if given is None else {"--kv-bits": given}) == want


@pytest.mark.parametrize("bad", ["2", "eight", ""])
def test_kv_bits_flag_refuses_what_the_declaration_lacks(bad: str) -> None:
    with pytest.raises(UsageError, match="--kv-bits"):
        kv_bits_flag({"--kv-bits": bad})


def test_kv_bits_flag_in_serves_spelling() -> None:
    """Every worker takes an option as serve spells it too (the face forwards it so)."""
    assert kv_bits_flag({"--basert-kv-bits": "8"}) == "8"
    with pytest.raises(UsageError, match="--basert-kv-bits '3': expected one of"):
        kv_bits_flag({"--basert-kv-bits": "3"})
    with pytest.raises(UsageError, match="--basert-kv-bits and --kv-bits name the same option: give one"):
        kv_bits_flag({"--basert-kv-bits": "8", "--kv-bits": "4"})


@pytest.mark.parametrize(("content", "says"), [
    pytest.param(b"GGUF\x03", "is not a baseRT model (it does not start with BASE)", id="another-format"),
    pytest.param(None, "cannot read", id="absent"),
])
def test_a_model_that_is_not_one_is_said_why(tmp_path: Path, content: bytes | None, says: str) -> None:
    path = tmp_path / "m.base"
    if content is not None:
        path.write_bytes(content)
    report = model_report(None, str(path))
    assert report["path"] == str(path) and says in report["reads"] and "facts" not in report


def test_a_model_without_a_library_is_not_read(tiny_model: Path) -> None:
    assert model_report(None, str(tiny_model))["reads"] == "not read: no usable libbaseRT here (see available)"


@pytest.mark.parametrize(("variant", "code", "available", "stated"), [
    pytest.param("0.4.0", 0, True, None, id="driven"),
    pytest.param("0.5.0", 1, "states ABI 2; this superfluid drives ABI 1", {"version": "0.5.0", "abi": 2},
                 id="another-abi-states-what-it-is"),
    pytest.param("missing-symbol", 1, "lacks", None, id="not-baseRT"),
])
def test_the_report_of_each_engine(engines: Path, tiny_model: Path, tmp_path: Path, variant: str, code: int,
                                   available: bool | str, stated: dict[str, Any] | None) -> None:
    lib = str(lib_path(engines, variant))
    report, got = check_report(str(tiny_model), lib, read({"SUPERFLUID_HOME": str(tmp_path),
                                                          "SUPERFLUID_HOST_OS": "linux"}))
    assert got == code and report.get("stated") == stated and report["named"] == "--basert-lib"
    if available is True:
        assert report["available"] is True and report["library"] == lib and report["devices"] == []
        assert report["model"]["reads"] is True and report["model"]["sizing"]["trained_context"] > 0
    else:
        assert isinstance(report["available"], str) and available in report["available"]
        assert report["model"]["reads"] == "not read: no usable libbaseRT here (see available)"


def test_check_argv_names_the_flag_as_given(engines: Path, tmp_path: Path) -> None:
    env = read({"SUPERFLUID_HOME": str(tmp_path)})
    report, code = check_argv(["--lib", str(lib_path(engines, "0.4.0")), "--kv-bits", "8"], env)
    assert code == 0 and report["named"] == "--lib" and "model" not in report
    with pytest.raises(UsageError, match="unknown flag --threads"):
        check_argv(["--threads", "2"], env)


@pytest.mark.parametrize(("os_name", "backend"), [("linux", "CUDA"), ("macos", "Metal")])
def test_the_check_names_its_devices_backend_without_probing_the_host(engines: Path, tmp_path: Path, os_name: str,
                                                                      backend: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the OS names the backend: the loader's cache and the library folders are not read (the
    probe of an install waits for this check: 4 ms of its 6 were that reading)."""

    def refused(*_: object) -> object:
        raise AssertionError("the check probed the host")

    monkeypatch.setattr(host, "_detect", refused)
    monkeypatch.setenv("BASERT_REF_DEVICE_BUDGET", str(1 << 30))  # the reference engine's device
    report, code = check_argv(["--lib", str(lib_path(engines, "0.4.0"))], read({"SUPERFLUID_HOME": str(tmp_path),
                                                                               "SUPERFLUID_HOST_OS": os_name}))
    assert code == 0 and [d["backend"] for d in report["devices"]] == [backend]
