"""``runtime/errors``: each typed error's message as a user reads it (its fields kept for callers),
and ``guarded``, the exit code of a program that is not the face."""

from __future__ import annotations

import pytest

from superfluid.runtime.kernel.errors import (
    AbiRefused,
    BadFile,
    InconsistentRelease,
    LibraryNotFound,
    LibraryRefused,
    SuperfluidError,
    UsageError,
    WorkerFailed,
    guarded,
)
from superfluid.runtime.kernel.fixes import Fix


@pytest.mark.parametrize(("error", "message"), [
    pytest.param(SuperfluidError("it broke"), "it broke", id="plain"),
    pytest.param(SuperfluidError("it broke", advice="run x"), "it broke: run x", id="with-advice"),
    pytest.param(SuperfluidError("it broke", fix=Fix.superfluid("runtime", "list", does="lists them")),
                 "it broke: `superfluid runtime list` lists them", id="with-fix"),
    pytest.param(BadFile("/h/r.json", "not JSON"), "/h/r.json: not JSON", id="bad-file"),
    pytest.param(BadFile("/h/r.json", "expected list", json_path="$.assets", advice="reinstall"),
                 "/h/r.json at $.assets: expected list: reinstall", id="bad-file-at-a-path"),
    pytest.param(AbiRefused("/l/libbaseRT.so", 2, 1, version="0.5.0"),
                 "libbaseRT at /l/libbaseRT.so states ABI 2; this superfluid drives ABI 1", id="abi-refused"),
    pytest.param(WorkerFailed("superfluid-worker-mlx", "timed out"), "worker superfluid-worker-mlx: timed out",
                 id="worker-failed"),
    pytest.param(InconsistentRelease("o/r", "v1", "lists two ABIs"), "o/r v1: lists two ABIs", id="release"),
    pytest.param(InconsistentRelease("o/r", "v1", "states 2", asset="abi-1.txt", advice="report it"),
                 "o/r v1 asset abi-1.txt: states 2: report it", id="release-asset"),
])
def test_message(error: SuperfluidError, message: str) -> None:
    assert str(error) == message


def test_fields_are_kept() -> None:
    abi = AbiRefused("/l", 2, 1, version="0.5.0")
    assert isinstance(abi, LibraryRefused) and (abi.by_abi, abi.stated_abi, abi.stated_version) == (True, 2, "0.5.0")
    assert (abi.stated, abi.drives, abi.path) == (2, 1, "/l")
    plain = LibraryRefused("/l", "lacks a symbol")
    assert (plain.by_abi, plain.stated_abi, plain.stated_version) == (False, None, None)
    bad = BadFile("/f", "fault", json_path="$.x")
    assert (bad.path, bad.json_path, bad.fault, bad.message) == ("/f", "$.x", "fault", "/f at $.x: fault")
    assert LibraryNotFound("none", looked=["/a", "/b"]).looked == ["/a", "/b"] and LibraryNotFound("x").looked == []
    assert WorkerFailed("w", "hung", lasting=True).lasting and not WorkerFailed("w", "said no").lasting


def _raise(error: Exception) -> int:
    raise error


@pytest.mark.parametrize(("run", "code", "stderr"), [
    pytest.param(lambda: 0, 0, "", id="ok"),
    pytest.param(lambda: 3, 3, "", id="its-own-code"),
    pytest.param(lambda: _raise(UsageError("unknown flag --x")), 2, "w: unknown flag --x\n", id="usage"),
    pytest.param(lambda: _raise(BadFile("/f", "bad", advice="fix it")), 1, "w: /f: bad: fix it\n", id="typed"),
])
def test_guarded(capsys: pytest.CaptureFixture[str], run: object, code: int, stderr: str) -> None:
    assert guarded("w", run) == code  # type: ignore[arg-type]
    assert capsys.readouterr() == ("", stderr)


def test_guarded_lets_an_untyped_error_through() -> None:
    with pytest.raises(ZeroDivisionError):
        guarded("w", lambda: 1 // 0)
