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

from superfluid.runtime.kernel.jsonread import MAX_DEPTH, NotRegularFile, UntrustedJson, loads, read_bytes, read_json
from tests import cli


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
    done = cli.run("superfluid", "compat", "--release", doc, env=cli.environment(tmp_path / "home"), timeout=20)
    assert done.code == 1 and "Traceback" not in done.stderr
    assert fault in done.stderr and str(doc) in done.stderr


def test_compat_release_never_waits_on_a_fifo(tmp_path: Path) -> None:
    doc = tmp_path / "x.compat.json"
    os.mkfifo(doc)
    done = cli.run("superfluid", "compat", "--release", doc, env=cli.environment(tmp_path / "home"), timeout=20)
    assert done.code == 2 and f"--release {doc} is a FIFO, not a compat document file" in done.stderr


def test_the_parser_is_never_asked_to_recurse_deeply() -> None:
    """A document at the cap is still read where the interpreter's own recursion limit is low."""
    code = ("import sys; sys.setrecursionlimit(200); from superfluid.runtime.kernel.jsonread import loads; "
            "print(len(str(loads(b'[' * 64 + b']' * 64, max_bytes=1024))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 128


# -- the gate on a file: every kind of path a reader may meet, one row each ---------------------------


def _file(data: bytes) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(data)


def _link_to_fifo(p: Path) -> None:
    os.mkfifo(p.parent / "fifo")
    os.symlink(p.parent / "fifo", p)


GATE = [
    pytest.param(_file(b'{"a": [1]}'), False, None, {"a": [1]}, id="good"),
    pytest.param(_file(b" " * ((1 << 20) + 1)), False, NotRegularFile, "larger than 1048576 bytes", id="too-big"),
    pytest.param(_file(b"[" * 100000 + b"]" * 100000), False, UntrustedJson, "nested too deeply", id="too-deep"),
    pytest.param(_file(b'{"a": "\xff"}'), False, UntrustedJson, "not UTF-8", id="bad-utf8"),
    pytest.param(_fifo, False, NotRegularFile, "is a FIFO", id="fifo"),
    pytest.param(_directory, False, NotRegularFile, "is a directory", id="directory"),
    pytest.param(lambda p: None, False, FileNotFoundError, "", id="missing"),
    pytest.param(_link_out, False, NotRegularFile, "symbolic link", id="link"),
    pytest.param(_link_out, True, None, {}, id="link-followed-when-asked"),
    pytest.param(_link_to_fifo, True, NotRegularFile, "is a FIFO", id="followed-link-to-fifo"),
]


@pytest.mark.parametrize(("make", "follow", "error", "expected"), GATE)
def test_read_json(tmp_path: Path, make: Callable[[Path], None], follow: bool, error: type[Exception] | None,
                   expected: Any) -> None:
    path = tmp_path / "doc.json"
    make(path)
    if error is None:
        assert within(5, lambda: read_json(path, max_bytes=1 << 20, follow=follow)) == expected
        return
    with pytest.raises(error) as e:
        within(5, lambda: read_json(path, max_bytes=1 << 20, follow=follow))
    words = e.value.fault if isinstance(e.value, UntrustedJson) else (getattr(e.value, "strerror", "") or "")
    assert expected in words


# -- the callers that read JSON from a worker, a server or a document: each refuses hostile JSON its own
# -- way (the message it always gave), none recurses, none crashes

DEEP = b"[" * 100000 + b"]" * 100000


@pytest.mark.parametrize(("body", "fault"), [
    pytest.param(DEEP, "nested too deeply", id="deep"),
    pytest.param(b'{"prompt": "\\ud800"}', "lone surrogate", id="lone-surrogate"),
    pytest.param(b'{"prompt": NaN}', "NaN is not a JSON value", id="nan"),
    pytest.param(b"{not json", "Expecting property name", id="not-json"),
])
def test_a_completion_body(body: bytes, fault: str) -> None:
    from superfluid.runtime.serving.completions import RequestRefused, parse_completion

    with pytest.raises(RequestRefused) as e:
        within(5, lambda: parse_completion(body))
    assert e.value.status == 400 and "the body is not valid JSON" in str(e.value) and fault in str(e.value)


@pytest.mark.parametrize(("line", "expected"), [
    pytest.param(b'{"listening": "http://127.0.0.1:1"}\n', {"listening": "http://127.0.0.1:1"}, id="ready"),
    pytest.param(DEEP + b"\n", None, id="deep"),
    pytest.param(b"[" * (64 << 10) + b"\n", None, id="longer-than-a-ready-line"),
    pytest.param(b"\n", None, id="empty"),
])
def test_a_worker_ready_line(line: bytes, expected: Any) -> None:
    import io
    from types import SimpleNamespace

    from superfluid.supervise import _Child

    child = SimpleNamespace(proc=SimpleNamespace(stdout=io.BytesIO(line)))
    assert within(5, lambda: _Child.ready_line(child)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("body", "expected"), [
    pytest.param(b'{"message": "Not Found"}', ": Not Found", id="message"),
    pytest.param(DEEP[:2048], "", id="deep"),
    pytest.param(b'{"message": "caf\xe9"}', ": caf\ufffd", id="stray-byte-replaced"),
])
def test_an_error_body_of_a_server(body: bytes, expected: str) -> None:
    from superfluid.installer.transport.fetcher import _error_detail

    assert _error_detail(iter([body])) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("body", "expected"), [
    pytest.param(b'{"release": {"version": "0.1.0"}}', "0.1.0", id="stated"),
    pytest.param(DEEP, None, id="deep"),
    pytest.param(b'{"release": {"version": "\\ud800"}}', None, id="lone-surrogate"),
    pytest.param(None, None, id="none"),
])
def test_the_version_a_rejected_document_states(body: bytes | None, expected: str | None) -> None:
    from superfluid.manifest.index import _stated_version

    assert within(5, lambda: _stated_version(body)) == expected


def test_a_mirror_listing_nested_too_deeply(tmp_path: Path) -> None:
    from superfluid.installer.fleet.sync import _existing, _listing_path
    from superfluid.runtime.kernel.errors import BadFile

    path = _listing_path(tmp_path, "owner/repo")
    path.parent.mkdir(parents=True)
    path.write_bytes(DEEP)
    with pytest.raises(BadFile, match="is not a readable JSON listing \\(is nested too deeply"):
        within(5, lambda: _existing(tmp_path, "owner/repo"))


def test_a_service_answer_nested_too_deeply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse
    from types import SimpleNamespace

    from superfluid.commands import compat_service as compat
    from superfluid.installer.trust import manifest as manifest_trust
    from superfluid.runtime.kernel.errors import BadFile, SuperfluidError

    route = SimpleNamespace(asked="llamacpp build b1")
    not_answered = compat._not_answered("http://x/", route, 404, DEEP)
    assert isinstance(not_answered, SuperfluidError) and "has no answer for llamacpp build b1" in str(not_answered)
    monkeypatch.setattr(compat, "fetch_answer", lambda *a, **k: manifest_trust.Answer(200, DEEP))
    args = argparse.Namespace(release=None, key=None, require_signature=False, runtime="llamacpp", ask_abi=None,
                              ask_build="b1", ask_version=None, platform=None, service=str(tmp_path), json=True,
                              trust_root=None, insecure_no_freshness=True)
    with pytest.raises(BadFile, match="is not JSON \\(is nested too deeply"):
        within(5, lambda: compat.run(args))


def test_a_release_answer_nested_too_deeply(monkeypatch: pytest.MonkeyPatch) -> None:
    from superfluid import for_release
    from superfluid.installer.trust import manifest as manifest_trust
    from superfluid.runtime.kernel.errors import BadFile

    monkeypatch.setattr(for_release, "fetch_answer", lambda *a, **k: manifest_trust.Answer(200, DEEP))
    trust = manifest_trust.Trust("/nonexistent", insecure=True)
    with pytest.raises(BadFile, match="is not the manifest service's answer for a release \\(is nested too deeply"):
        within(5, lambda: for_release._from_service("http://x", "0.1.0", trust, keys=[], home="/nonexistent",
                                                    require_signature=False))


# -- no reader passes the gate by: a scan of the package's source --------------------------------------

#: modules of the package that may parse JSON themselves, by path, with the reason
ALLOWED = {"runtime/kernel/jsonread.py": "the gate itself"}
PACKAGE = ("runtime", "installer", "manifest", "superfluid")


def _offences(source: str) -> list[str]:
    """Each place ``source`` parses JSON without the gate: ``json.load(s)``, ``json.JSONDecoder``,
    ``raw_decode``, ``from json import load(s)``, ``json`` imported under another name, and a
    ``.json()`` call (requests' ``Response.json``)."""
    import ast

    names = {"json"}
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == "json" and a.asname}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names \
                and node.attr in ("load", "loads", "JSONDecoder", "decoder", "scanner"):
            found.append(f"{line}: json.{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr == "raw_decode":
            found.append(f"{line}: raw_decode")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "json" \
                and (node.module != "json" or any(a.name in ("load", "loads", "JSONDecoder") for a in node.names)):
            found.append(f"{line}: from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "json" \
                and not node.args:
            found.append(f"{line}: .json()")
    return found


@pytest.mark.parametrize(("source", "offends"), [
    pytest.param("import json\njson.loads(b)", True, id="json.loads"),
    pytest.param("import json\nwith open(p) as f:\n    json.load(f)", True, id="json.load"),
    pytest.param("import json as j\nj.loads(b)", True, id="renamed"),
    pytest.param("from json import loads\nloads(b)", True, id="from-import"),
    pytest.param("from json.decoder import JSONDecoder", True, id="decoder-module"),
    pytest.param("import json\njson.JSONDecoder().raw_decode(s)", True, id="raw-decode"),
    pytest.param("r = session.get(url)\nr.json()", True, id="response-json"),
    pytest.param("import json\njson.dumps(doc)", False, id="a-writer"),
    pytest.param("from superfluid.runtime.kernel.jsonread import loads\nloads(b, max_bytes=1)", False, id="the-gate"),
    pytest.param("from json import JSONDecodeError, dumps", False, id="dumps-and-the-error"),
])
def test_the_scan_finds_a_reader_that_bypasses_the_gate(source: str, offends: bool) -> None:
    assert bool(_offences(source)) is offends


def test_no_module_parses_json_outside_the_gate() -> None:
    from tests.conftest import ROOT

    bypassing = {}
    files = [p for top in PACKAGE for p in sorted((ROOT / top).rglob("*.py"))]
    assert len(files) > 50  # the package was found
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel not in ALLOWED:
            found = _offences(path.read_text(encoding="utf-8"))
            if found:
                bypassing[rel] = found
    assert bypassing == {}, "parse through superfluid.runtime.kernel.jsonread (read_json, read_bytes + loads)"


@pytest.mark.parametrize("text", [b'"\\ud800"', b'{"a\\uDBFF": 1}', b'["x", {"k": ["\\udc00y"]}]', '"\ud800"'],
                         ids=["escape", "key-upper-hex", "nested", "a-str-with-one"])
def test_a_lone_surrogate_is_refused_however_it_comes(text: bytes | str) -> None:
    with pytest.raises(UntrustedJson, match="lone surrogate"):
        loads(text, max_bytes=100)


@pytest.mark.parametrize(("text", "want"), [(b'"\\ud83d\\ude00"', "\U0001f600"), (b'"\\\\ud800"', "\\ud800")],
                         ids=["a-pair", "an-escaped-backslash"])
def test_a_surrogate_pair_or_an_escaped_backslash_reads(text: bytes, want: str) -> None:
    assert loads(text, max_bytes=100) == want
