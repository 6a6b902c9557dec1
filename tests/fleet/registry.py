"""A real OCI distribution registry on loopback for tests: Debian's ``docker-registry`` (the CNCF
``distribution`` server, ``docker-registry serve CONFIG``), its filesystem storage in a temp folder,
with or without htpasswd basic auth; its access log (combined format, on its stdout) read back as
the requests it answered.

The htpasswd line is fixed (``LOGIN``): distribution reads bcrypt only, and this one bcrypt hash
(cost 4) of ``PASSWORD`` spares the tests a bcrypt module or apache2-utils' ``htpasswd``. It was
made with ``python3 -c 'import crypt; print(crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH,
rounds=16)))'`` (``htpasswd -nbB -C 4 fleet PASSWORD`` makes an equal one).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Registry", "Access", "USER", "PASSWORD", "docker_config", "REGISTRY"]

REGISTRY = shutil.which("docker-registry")
USER = "fleet"
PASSWORD = "correct-horse-fleet-7"
_HTPASSWD = "fleet:$2b$04$bFtvWPxRaN6DAhSJQnbDtug0mWPPMzLNt36e/edBdbSmC7K5nf5vi\n"
REPOSITORY = "fleet/engines"
_LINE = re.compile(r'\S+ \S+ \S+ \[[^]]+\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+|-)')


@dataclass(frozen=True)
class Access:
    """One request the registry answered: method, path, status and body bytes sent."""

    method: str
    path: str
    status: int
    bytes: int


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def docker_config(home: Path, host: str, user: str = USER, password: str = PASSWORD) -> Path:
    """``home/.docker/config.json`` with an ``auths`` entry for ``host`` as ``docker login`` writes it."""
    path = home / ".docker" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": token}}}, indent="\t"))
    return path


class Registry:
    """``docker-registry serve`` on a free loopback port (``with Registry(tmp) as r``)."""

    def __init__(self, root: Path, *, auth: bool = False) -> None:
        if REGISTRY is None:
            pytest.skip("docker-registry is not installed (scripts/system-tools test installs it)")
        self.root = root
        self.auth = auth
        self.port = _free_port()
        self._log = root / "access.log"
        self._seen = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """``oci://127.0.0.1:PORT/fleet/engines``."""
        return f"oci://{self.host}/{REPOSITORY}"

    def _config(self) -> Path:
        lines = ["version: 0.1", "log:", "  level: error", "  accesslog:", "    disabled: false",
                 "storage:", "  filesystem:", f"    rootdirectory: {self.root / 'data'}",
                 "  maintenance:", "    uploadpurging:", "      enabled: false",
                 "http:", f"  addr: 127.0.0.1:{self.port}", "  secret: superfluid-tests"]
        if self.auth:
            (self.root / "htpasswd").write_text(_HTPASSWD)
            lines += ["auth:", "  htpasswd:", "    realm: fleet-registry", f"    path: {self.root / 'htpasswd'}"]
        path = self.root / "config.yml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> Registry:
        assert REGISTRY is not None
        self.root.mkdir(parents=True, exist_ok=True)
        config = self._config()
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen([REGISTRY, "serve", str(config)], stdout=log,
                                          stderr=open(self.root / "error.log", "wb"),  # noqa: SIM115
                                          stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # 401: it answers
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    failed = (self.root / "error.log").read_text()
                    raise RuntimeError(f"docker-registry did not start: {failed}") from None
                time.sleep(0.05)
        self.clear_log()
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def clear_log(self) -> None:
        time.sleep(0.05)  # the registry writes its line as it answers
        self._seen = self._log.stat().st_size

    def log(self) -> list[Access]:
        """The requests answered since ``clear_log``."""
        time.sleep(0.05)
        with open(self._log, "rb") as f:
            f.seek(self._seen)
            text = f.read().decode("utf-8", "replace")
        out = []
        for line in text.splitlines():
            m = _LINE.match(line)
            if m:
                out.append(Access(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)) if m.group(4) != "-" else 0))
        return out

    def blob_file(self, sha256: str) -> Path:
        """Where the registry keeps a blob's bytes (a test flips one to prove it is refused)."""
        return self.root / "data" / "docker" / "registry" / "v2" / "blobs" / "sha256" / sha256[:2] / sha256 / "data"

    def tags(self) -> list[str]:
        folder = self.root / "data" / "docker" / "registry" / "v2" / "repositories" / REPOSITORY / "_manifests" / "tags"
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
