"""A hostile registry (issue 36, item 4): every answer of every request the registry client makes is
capped and timed as downloads are. A loopback server that speaks the distribution API until the
moment it turns: its answer to the upload's ``POST`` or ``PUT``, or a manifest, is an endless body
(sent as fast as the socket takes it), a trickle, or nothing at all. ``mirror push oci://`` and
``runtime install --mirror oci://`` (the real command) end within the configured limits, exit 1,
no traceback; the client alone, with small limits, ends within its overall deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError
from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.lockfile import Lock, LockedFile
from superfluid.installer.fleet.push import push
from superfluid.installer.sources.oci.client import ANSWER_MAX_BYTES, registry_for
from superfluid.installer.sources.oci.ref import MANIFEST_MAX_BYTES, parse_ref
from tests.conftest import Home
from tests.settings_from import settings_from

REPOSITORY = "fleet/engines"


class Hostile:
    """A registry on loopback: no blob and no index held, uploads accepted, except where ``turn``
    names the answer that goes wrong (``post``, ``put``, ``manifest``) and ``how`` (``endless``,
    ``trickle``, ``silent``)."""

    def __init__(self, turn: str, how: str) -> None:
        self.turn, self.how = turn, how
        self.seen: list[tuple[str, str]] = []
        self.stop = threading.Event()
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's names
                hostile.answer(self)

            do_HEAD = do_POST = do_PUT = do_PATCH = do_GET  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"oci://127.0.0.1:{self.httpd.server_address[1]}/{REPOSITORY}"

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        self.seen.append((h.command, h.path))
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            h.rfile.read(length)
        turn = {"POST": "post", "PUT": "put"}.get(h.command) or ("manifest" if "/manifests/" in h.path else "")
        if turn == self.turn:
            return self._turn(h)
        if h.command == "POST":
            return self._send(h, 202, {"Location": f"/v2/{REPOSITORY}/blobs/uploads/1"})
        if h.command == "PUT":
            return self._send(h, 201, {})
        self._send(h, 404, {}, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}')

    def _turn(self, h: BaseHTTPRequestHandler) -> None:
        status = {"post": 202, "put": 201, "manifest": 200}[self.turn]
        if self.how == "silent":  # the request read, no answer ever
            self.stop.wait(60)
            return
        h.send_response(status)
        h.send_header("Location", f"/v2/{REPOSITORY}/blobs/uploads/1")
        h.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        h.end_headers()  # no length: the body runs until the connection closes
        chunk = b"{" * (64 << 10) if self.how == "endless" else b" "
        try:
            while not self.stop.is_set():
                h.wfile.write(chunk)
                h.wfile.flush()
                if self.how == "trickle":
                    time.sleep(0.05)
        except OSError:
            pass  # the client hung up: as it should

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        h.send_response(status)
        for k, v in {**headers, "Content-Length": str(len(body))}.items():
            h.send_header(k, v)
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[Hostile]:
    turn, how = request.param
    h = Hostile(turn, how)
    yield h
    h.close()


def _lock_file(lock: Lock, where: Path) -> Path:
    """``lock`` written as ``superfluid lock`` writes one (each digest from the release's listing)."""
    def listed(f: LockedFile) -> LockedFile:
        return replace(f, digest_source="release")

    lock = replace(lock, engines=tuple(replace(e, assets=tuple(map(listed, e.assets)),
                                               evidence=tuple(map(listed, e.evidence))) for e in lock.engines))
    path = where / "superfluid.lock"
    lockfile.write(path, lock)
    return path


@pytest.mark.parametrize("hostile", [("post", "endless"), ("put", "endless"), ("manifest", "endless")],
                         ids=["upload-post", "upload-put", "index-manifest"], indirect=True)
def test_mirror_push_to_an_endless_answer_ends_with_exit_1(hostile: Hostile, file_lock: Lock, cli_home: Home,
                                                            tmp_path: Path) -> None:
    path = _lock_file(file_lock, tmp_path)
    started = time.monotonic()
    run = cli_home.superfluid("mirror", "push", hostile.url, "--lock", str(path), timeout=90)
    took = time.monotonic() - started
    assert run.code == 1, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr and took < 30, (took, run.stderr)
    cap = MANIFEST_MAX_BYTES if hostile.turn == "manifest" else ANSWER_MAX_BYTES
    assert f"more than {cap} bytes" in run.stderr, run.stderr
    assert hostile.url.removeprefix("oci://").split("/")[0] in run.stderr


@pytest.mark.parametrize("hostile", [("manifest", "endless")], ids=["index-manifest"], indirect=True)
def test_an_install_from_an_endless_index_ends_with_exit_1(hostile: Hostile, cli_home: Home) -> None:
    started = time.monotonic()
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", hostile.url, timeout=90)
    assert run.code == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"more than {MANIFEST_MAX_BYTES} bytes" in run.stderr and time.monotonic() - started < 30
    assert cli_home.installs() == []


LIMITS = FetchConfig(stall_timeout=0.5, connect_timeout=0.5, patience=1.5, retries=4, backoff_base=0.1,
                     backoff_max=0.2, stall_min_bytes=1024)


@pytest.mark.parametrize("hostile", [("post", "trickle"), ("put", "trickle"), ("post", "silent"),
                                     ("put", "silent"), ("manifest", "trickle"), ("manifest", "silent")],
                         ids=["post-trickles", "put-trickles", "post-silent", "put-silent", "manifest-trickles",
                              "manifest-silent"], indirect=True)
def test_a_slow_or_silent_answer_ends_within_the_overall_deadline(hostile: Hostile, file_lock: Lock,
                                                                  cli_home: Home) -> None:
    ref = parse_ref(hostile.url)
    net = registry_for(ref, settings_from(cli_home.env), LIMITS, push=True)
    started = time.monotonic()
    try:
        with pytest.raises(DownloadError) as e:
            push(file_lock, ref, settings_from(cli_home.env, config=LIMITS), registry=net)
    finally:
        net.close()
    took = time.monotonic() - started
    # each request gives up once no byte came for `patience` (1.5 s); a trickle under stall_min_bytes
    # a stall_timeout window is no byte; waits between attempts count
    assert took < 3 * LIMITS.patience + 2, (took, str(e.value))
    assert "stall timeout" in str(e.value) or "deadline" in str(e.value), str(e.value)
