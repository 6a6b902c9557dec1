"""Ctrl-C during a download keeps the bytes received, and the next run resumes them (issue 42, item 31),
through the real CLI against the loopback release server: the install is interrupted with a real
SIGINT while its download is stalled after 3000 bytes; the partial holds those bytes, and the next
install asks for the rest (``Range: bytes=3000-``) and installs."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.conftest import Home
from tests.end_to_end import releases
from tests.release_server import ReleaseServer

AFTER = 3000


def _partials(home: Home) -> list[Path]:
    folder = home.path / "cache" / "partial"
    return sorted(folder.glob("*.partial")) if folder.is_dir() else []


def test_an_interrupted_download_keeps_its_bytes_and_the_next_run_resumes_them(cli_home: Home,
                                                                               server: ReleaseServer) -> None:
    name = releases.bundle_name("0.4.0")
    path = server.mirror_path(releases.REPO, "v0.4.0", name)
    server.fault(path, "stall", after=AFTER, seconds=30.0)
    argv = ("runtime", "install", "basert", "--mirror", server.mirror_url)  # streamed: extracted as it arrives
    proc = cli_home.popen(*argv)
    deadline = time.monotonic() + 30
    while not [r for r in server.requests_to(path) if r.status == 200]:  # the stalled answer began
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.5)  # its first bytes are read
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err.rstrip().endswith("superfluid: interrupted"), err
    (partial,) = _partials(cli_home)
    assert partial.stat().st_size == AFTER  # the bytes received, not 0
    assert cli_home.installs() == []

    server.clear_log()
    run = cli_home.superfluid(*argv)
    assert run.code == 0 and cli_home.installs() == ["0.4.0-cpu"], run.stderr
    (asked,) = [r for r in server.requests_to(path) if r.path == path]  # not its bundle's <asset>.sigstore.json
    assert asked.header("Range") == f"bytes={AFTER}-" and asked.status == 206
    assert _partials(cli_home) == []
