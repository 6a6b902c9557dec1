"""The download bar on a real terminal (issue 15, item 5): ``superfluid runtime install`` with its
stderr on a pty draws the bar (kB for the small reference bundle, a bar, a percent); on a pipe, or
with ``CI`` set, or with ``--json``, no bar is drawn at all."""

from __future__ import annotations

import os
import pty
import threading

import pytest

from tests import cli
from tests.end_to_end import releases
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

BAR = "\r\x1b[K"


def _on_a_pty(home: Home, env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    """Run superfluid with stderr on a pty; (exit code, stdout, what the terminal received)."""
    master, slave = pty.openpty()
    got: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side closed
                return
            if not chunk:
                return
            got.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    proc = cli.start("superfluid", *argv, env=env, stderr=slave)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()  # one past the timeout (an exited one is left alone)
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    return proc.wait(), out, b"".join(got).decode("utf-8", "replace")


def test_a_bar_on_a_terminal(cli_home: Home, server: ReleaseServer) -> None:
    code, out, tty = _on_a_pty(cli_home, cli_home.env, "runtime", "install", "basert", "--mirror", server.mirror_url)
    assert code == 0, tty
    frames = [f for f in tty.replace("\r\n", "\n").split(BAR) if f.strip() and "\n" not in f]
    bundle = releases.bundle_name("0.4.0")
    assert frames, tty
    # the first frame as the transfer starts: the file, an empty bar, the small bundle counted in kB
    assert frames[0].startswith(f"{bundle}  [....................]   0%  0.0/") and frames[0].endswith(" kB")
    assert tty.count(BAR) <= 12  # one small download: a handful of frames, never one per chunk
    assert tty.endswith(BAR)  # cleared when done: the result lines start clean
    assert "basert 0.4.0-cpu installed" in out


@pytest.mark.parametrize("how", ["ci", "json"])
def test_no_bar_in_ci_or_json_even_on_a_terminal(cli_home: Home, server: ReleaseServer, how: str) -> None:
    env = {**cli_home.env, "CI": "true"} if how == "ci" else cli_home.env
    flags = ["--json"] if how == "json" else []
    code, _, tty = _on_a_pty(cli_home, env, "runtime", "install", "basert", "--mirror", server.mirror_url, *flags)
    assert code == 0, tty
    assert BAR not in tty and "[" not in tty


def test_no_bar_on_a_pipe(cli_home: Home, server: ReleaseServer) -> None:
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url)
    assert run.code == 0, run.stderr
    assert "\r" not in run.stderr and "\x1b" not in run.stderr and "%" not in run.stderr
    assert "installing basert 0.4.0-cpu" in run.stderr
