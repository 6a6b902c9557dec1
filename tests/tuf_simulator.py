"""A TUF repository simulator served on loopback, after python-tuf's ``tests/repository_simulator.py``.

The metadata lives in memory as ``tuf.api.metadata`` objects and is signed when fetched, so an
attack test changes a field or two (``sim.timestamp.version = 1``), or publishes a new version,
and asks again. Unlike python-tuf's simulator it is served over real HTTP on 127.0.0.1 (so the
client's own fetcher, limits and errors are in the path), and it can serve any version it ever
published (``sim.replay["timestamp"] = 1``), a stream that never ends (``sim.endless``), or other
bytes for a path (``sim.override``). ``fetched`` records every path asked, in order.

Paths: ``/metadata/<N>.root.json``, ``/metadata/<role>.json`` and every target at its own path (as
the manifest service's export lays them out: consistent snapshots off).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from securesystemslib.signer import CryptoSigner, Signer
from tuf.api.metadata import Metadata, MetaFile, Root, Snapshot, TargetFile, Targets, Timestamp
from tuf.api.serialization.json import JSONSerializer

__all__ = ["TufSimulator"]

ROLES = ("root", "timestamp", "snapshot", "targets")


class TufSimulator:
    """A repository: signers per role, the current metadata, every version published, the targets."""

    def __init__(self, *, root_keys: int = 1, root_threshold: int = 1) -> None:
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        self.safe_expiry = now + datetime.timedelta(days=30)
        self.signers: dict[str, dict[str, Signer]] = {role: {} for role in ROLES}
        self.md_root = Metadata(Root(expires=now + datetime.timedelta(days=365), consistent_snapshot=False))
        self.md_timestamp = Metadata(Timestamp(expires=self.safe_expiry))
        self.md_snapshot = Metadata(Snapshot(expires=self.safe_expiry))
        self.md_targets = Metadata(Targets(expires=self.safe_expiry))
        for role in ROLES:
            for _ in range(root_keys if role == "root" else 1):
                self.add_signer(role, CryptoSigner.generate_ed25519())
        self.root.roles["root"].threshold = root_threshold
        self.signed_roots: list[bytes] = []
        self.history: dict[str, dict[int, bytes]] = {role: {} for role in ROLES if role != "root"}
        self.replay: dict[str, int] = {}  # role -> the older version served instead of the current
        self.override: dict[str, bytes] = {}  # path -> bytes served instead
        self.endless: set[str] = set()  # paths answered by a body that never ends
        self.target_files: dict[str, bytes] = {}
        self.fetched: list[str] = []
        self.publish_root()
        self.update_snapshot()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"

    # -- the metadata ------------------------------------------------------------------------------

    @property
    def root(self) -> Root:
        return self.md_root.signed

    @property
    def timestamp(self) -> Timestamp:
        return self.md_timestamp.signed

    @property
    def snapshot(self) -> Snapshot:
        return self.md_snapshot.signed

    @property
    def targets(self) -> Targets:
        return self.md_targets.signed

    def add_signer(self, role: str, signer: Signer) -> None:
        self.root.add_key(signer.public_key, role)
        self.signers[role][signer.public_key.keyid] = signer

    def rotate_keys(self, role: str) -> list[Signer]:
        """Every key of ``role`` replaced by a new one (threshold kept); answers the old signers."""
        old = list(self.signers[role].values())
        for keyid in list(self.root.roles[role].keyids):
            self.root.revoke_key(keyid, role)
        self.signers[role].clear()
        for _ in range(self.root.roles[role].threshold):
            self.add_signer(role, CryptoSigner.generate_ed25519())
        return old

    def publish_root(self, *, signers: list[Signer] | None = None) -> None:
        """Sign and keep the current root as its version (with ``signers``, else the root's own keys)."""
        self.md_root.signatures.clear()
        for signer in signers if signers is not None else list(self.signers["root"].values()):
            self.md_root.sign(signer, append=True)
        self.signed_roots.append(self.md_root.to_bytes(JSONSerializer()))

    def signed(self, role: str) -> bytes:
        """``role``'s current metadata, signed by its signers."""
        md: Metadata[Any] = {"timestamp": self.md_timestamp, "snapshot": self.md_snapshot,
                             "targets": self.md_targets}[role]
        md.signatures.clear()
        for signer in self.signers[role].values():
            md.sign(signer, append=True)
        data = md.to_bytes(JSONSerializer())
        return data

    def add_target(self, path: str, data: bytes) -> None:
        self.targets.targets[path] = TargetFile.from_data(path, data, ["sha256"])
        self.target_files[path] = data

    def update_timestamp(self) -> None:
        """The timestamp one version up, naming the current snapshot (its length and SHA-256)."""
        self.timestamp.snapshot_meta = MetaFile.from_data(self.snapshot.version, self.signed("snapshot"), ["sha256"])
        self.timestamp.version += 1
        self.history["timestamp"][self.timestamp.version] = self.signed("timestamp")

    def update_snapshot(self) -> None:
        """The snapshot one version up naming the current targets, then the timestamp."""
        self.history["targets"][self.targets.version] = self.signed("targets")
        self.snapshot.meta["targets.json"] = MetaFile.from_data(self.targets.version, self.signed("targets"),
                                                                ["sha256"])
        self.snapshot.version += 1
        self.history["snapshot"][self.snapshot.version] = self.signed("snapshot")
        self.update_timestamp()

    def publish(self, files: dict[str, bytes] | None = None) -> None:
        """A new index: these targets (by path) added, targets one version up, then snapshot and timestamp."""
        for name, data in (files or {}).items():
            self.add_target(name, data)
        self.targets.version += 1
        self.update_snapshot()

    # -- serving -------------------------------------------------------------------------------------

    def fetch(self, path: str) -> tuple[int, bytes]:
        """(status, body) for a GET of ``path``."""
        self.fetched.append(path)
        if path in self.override:
            return 200, self.override[path]
        name = path.removeprefix("/metadata/")
        if name != path:
            if name.endswith(".root.json"):
                version = name.split(".", 1)[0]
                if version.isdigit() and 1 <= int(version) <= len(self.signed_roots):
                    return 200, self.signed_roots[int(version) - 1]
                return 404, b"no such root"
            role = name.removesuffix(".json")
            if role not in self.history:
                return 404, b"no such role"
            if role in self.replay:
                return 200, self.history[role][self.replay[role]]
            return 200, self.signed(role)
        data = self.target_files.get(path.lstrip("/"))
        return (200, data) if data is not None else (404, b"no such target")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(sim: TufSimulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = self.path.split("?", 1)[0]
            if path in sim.endless:
                sim.fetched.append(path)
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for chunk in _forever():
                        self.wfile.write(chunk)
                except OSError:
                    pass  # the client stopped reading: what the test wants
                self.close_connection = True
                return
            status, body = sim.fetch(path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _forever() -> Iterator[bytes]:
    block = b"{" * 65536
    for _ in range(4096):  # 256 MiB at most, should a client never stop
        yield block
