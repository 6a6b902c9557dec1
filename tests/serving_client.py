"""A worker's ``serve`` (or ``superfluid serve``) as a child process on port 0, and a small HTTP
client for it (shared by the basert, llama.cpp and ``superfluid serve`` tests)."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ServeProcess", "SuperfluidServe", "STARTUP"]

#: ``superfluid serve``'s startup line
STARTUP = re.compile(r"^superfluid: (?P<runtime>\S+) (?P<version>.+?) serves (?P<model>\S+) on "
                     r"(?P<listening>http://\S+) \((?P<where>.+)\)$")


class ServeProcess:
    """A running ``serve`` child and its announced address (its first stdout line)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            _, err = self.proc.communicate()
            pytest.fail(f"serve announced nothing (exit {self.proc.returncode}): {err[-2000:]}")
        self.ready: dict[str, Any] = self.parse_ready(line)
        self.host, port = self.ready["listening"].removeprefix("http://").rsplit(":", 1)
        self.port = int(port)

    def parse_ready(self, line: str) -> dict[str, Any]:
        """The ready line: a worker's is JSON with ``listening``."""
        ready: dict[str, Any] = json.loads(line)
        return ready

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def raw(self, method: str, path: str, body: bytes | dict[str, Any] | None = None,
            headers: dict[str, str] | None = None) -> tuple[http.client.HTTPResponse, bytes]:
        """One request on a fresh connection: the response and its body (always JSON for this server)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            data = json.dumps(body).encode() if isinstance(body, dict) else body
            conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
            resp = conn.getresponse()
            raw = resp.read()
            assert resp.getheader("Content-Type") == "application/json", raw
            return resp, raw
        finally:
            conn.close()

    def request(self, method: str, path: str, body: bytes | dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        resp, raw = self.raw(method, path, body, headers)
        return resp.status, json.loads(raw)

    def complete(self, **body: Any) -> dict[str, Any]:
        status, answer = self.request("POST", "/v1/completions", body)
        assert status == 200, answer
        return answer

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, out, err

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


class SuperfluidServe(ServeProcess):
    """``superfluid serve`` as a child: its startup line (``STARTUP``) read as the ready line."""

    def parse_ready(self, line: str) -> dict[str, Any]:
        m = STARTUP.match(line.rstrip("\n"))
        if m is None:
            self.proc.kill()
            pytest.fail(f"superfluid serve's first line is not its startup line: {line!r}")
        return {**m.groupdict(), "line": line.rstrip("\n")}

    def children(self) -> list[int]:
        """The pids of its child processes (the worker), from /proc."""
        return children_of(self.proc.pid)


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        # the command may hold spaces and parentheses: the fields after the last ")" are fixed
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
