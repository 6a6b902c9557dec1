"""The one reader of untrusted files and JSON (issue 14, items 8, 9): every hostile input is a named
row, refused with its reason; none hangs (each read runs under a deadline), none recurses, none
reads without end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.jsonread import MAX_DEPTH, NotRegularFile, UntrustedJson, loads, read_bytes, read_json
from tests.conftest import VENV_BIN


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``, failing the test if it takes longer than ``seconds`` (a hang fails fast)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the test thread
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"did not return within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


REFUSED = [
    pytest.param(b"[" * 100000 + b"]" * 100000, "nested too deeply", id="nested-100000"),
    pytest.param(b'{"a": ' * 100000 + b"1" + b"}" * 100000, "nested too deeply", id="objects-100000"),
    pytest.param(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nested too deeply", id="one-past-the-cap"),
    pytest.param(b'"\\ud800"', "lone surrogate", id="lone-high-surrogate"),
    pytest.param(b'{"\\udc00": 1}', "lone surrogate", id="lone-low-surrogate-key"),
    pytest.param(b'["\\ud800\\u0041"]', "lone surrogate", id="high-then-not-low"),
    pytest.param(b"\xff\xfe{}", "not UTF-8", id="utf16-bom"),
    pytest.param('{"a": "é"}'.encode("latin-1"), "not UTF-8", id="latin-1"),
    pytest.param(b'{"a": NaN}', "NaN", id="nan"),
    pytest.param(b"[Infinity]", "Infinity", id="infinity"),
    pytest.param(b"{'a': 1}", "not valid JSON at line 1, column 2", id="single-quotes"),
    pytest.param(b"", "not valid JSON", id="empty"),
    pytest.param(b"1" * 5000, "not valid JSON", id="int-of-5000-digits"),
    pytest.param(b" " * 2000, "larger than 1024 bytes", id="too-large"),
]


@pytest.mark.parametrize(("data", "fault"), REFUSED)
def test_refused(data: bytes, fault: str) -> None:
    with pytest.raises(UntrustedJson) as e:
        within(5, lambda: loads(data, max_bytes=1024 if len(data) == 2000 else 1 << 20))
    assert fault in e.value.fault


ACCEPTED = [
    pytest.param(b'{"a": [1, 2.5, true, null, "x"]}', {"a": [1, 2.5, True, None, "x"]}, id="plain"),
    pytest.param(b'"\\ud83d\\ude00"', "\U0001F600", id="surrogate-pair"),
    pytest.param(b'["[[[[{{{{", "\\"]"]', ["[[[[{{{{", '"]'], id="brackets-in-strings"),
    pytest.param(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, None, id="at-the-cap"),
]


@pytest.mark.parametrize(("data", "expected"), ACCEPTED)
def test_accepted(data: bytes, expected: Any) -> None:
    got = loads(data, max_bytes=1 << 20)
    if expected is not None:
        assert got == expected


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _dev_zero(p: Path) -> None:
    os.symlink("/dev/zero", p)


def _link_out(p: Path) -> None:
    target = p.parent / "elsewhere.json"
    target.write_text("{}")
    os.symlink(target, p)


def _big(p: Path) -> None:
    with open(p, "wb") as f:
        f.truncate(1 << 30)


def _directory(p: Path) -> None:
    p.mkdir()


FILES = [
    pytest.param(_fifo, "is a FIFO", id="fifo"),
    pytest.param(_dev_zero, "symbolic link", id="link-to-dev-zero"),
    pytest.param(_link_out, "symbolic link", id="link-out"),
    pytest.param(_big, "larger than", id="one-gib"),
    pytest.param(_directory, "directory", id="directory"),
]


@pytest.mark.parametrize(("make", "fault"), FILES)
def test_files_that_are_not_what_their_name_says(tmp_path: Path, make: Callable[[Path], None], fault: str) -> None:
    path = tmp_path / "runtime.json"
    make(path)
    with pytest.raises(NotRegularFile) as e:
        within(5, lambda: read_bytes(path, max_bytes=64 << 10))
    assert fault in (e.value.strerror or "")


def test_a_named_link_is_followed_when_asked(tmp_path: Path) -> None:
    _link_out(tmp_path / "doc.json")
    with pytest.raises(NotRegularFile, match="symbolic link"):
        read_json(tmp_path / "doc.json", max_bytes=1024)
    assert read_bytes(tmp_path / "doc.json", max_bytes=1024, follow=True) == b"{}"
    os.unlink(tmp_path / "doc.json")
    _dev_zero(tmp_path / "doc.json")
    with pytest.raises(NotRegularFile, match="character device"):
        within(5, lambda: read_bytes(tmp_path / "doc.json", max_bytes=1024, follow=True))


@pytest.mark.parametrize(("data", "fault"), [
    pytest.param(b"[" * 100000 + b"]" * 100000, "nested too deeply", id="nested-100000"),
    pytest.param(b'{"schema": "superfluid-compat/1", "release": {"name": "\\ud800"}}', "lone surrogate",
                 id="lone-surrogate"),
    pytest.param(b"\xff\xfe", "not UTF-8", id="not-utf8"),
])
def test_compat_release_reads_a_hostile_document_with_limits(tmp_path: Path, data: bytes, fault: str) -> None:
    doc = tmp_path / "x.compat.json"
    doc.write_bytes(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPERFLUID_")}
    env["SUPERFLUID_HOME"] = str(tmp_path / "home")
    done = subprocess.run([str(VENV_BIN / "superfluid"), "compat", "--release", str(doc)], env=env,
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert fault in done.stderr and str(doc) in done.stderr


def test_compat_release_never_waits_on_a_fifo(tmp_path: Path) -> None:
    doc = tmp_path / "x.compat.json"
    os.mkfifo(doc)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPERFLUID_")}
    env["SUPERFLUID_HOME"] = str(tmp_path / "home")
    done = subprocess.run([str(VENV_BIN / "superfluid"), "compat", "--release", str(doc)], env=env,
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 1 and "not a regular file" in done.stderr


def test_the_parser_is_never_asked_to_recurse_deeply() -> None:
    """A document at the cap is still read where the interpreter's own recursion limit is low."""
    code = ("import sys; sys.setrecursionlimit(200); from superfluid.runtime.jsonread import loads; "
            "print(len(str(loads(b'[' * 64 + b']' * 64, max_bytes=1024))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 128
