"""A fleet on loopback: N machines install ``--locked`` at once, from an OCI registry and from a static mirror.

One admin machine locks baseRT 0.4.0 for linux-x64 against the loopback release server (its
bundle padded with ``--mb`` MiB of incompressible bytes, so that bytes dominate), then

- pushes the lock's files to a real ``docker-registry`` (the CNCF distribution server, storage in
  a temp folder) with ``superfluid mirror push oci://...``, and
- syncs them into a folder with ``superfluid mirror sync DIR``, served by ``python -m http.server``.

For each source, one machine installs alone, then ``--nodes`` machines (fresh homes, real
processes) install at the same moment, ``superfluid runtime install --locked --mirror SRC``; every
install must succeed. Printed per source: the wall time of N against one (N at once on this
machine's cores: the ratio says how the source holds up, not a network), and, for the N run, the
requests and bytes each host served (the registry's from its access log, the static server's from
its request log and the files' sizes) and the requests that reached the release server, which
must be zero.

Run by hand (``scripts/bench``), never in CI. Bounded: at most 100 machines, every process has a
timeout. Usage: ``python benchmarks/bench_fleet.py [--nodes N] [--mb M] [--json]``; exit 1 when an
install failed or the release server was asked anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.end_to_end import releases  # noqa: E402
from tests.fleet.conftest import Machine, machine_at  # noqa: E402
from tests.fleet.registry import Registry  # noqa: E402
from tests.release_server import ReleaseServer  # noqa: E402

MAX_NODES = 100
TIMEOUT = 600.0  # seconds the whole fleet may take to install
_STATIC_LINE = re.compile(r'"(GET|HEAD) (\S+) [^"]*" (\d{3})')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _must(m: Machine, *argv: str) -> None:
    done = m.superfluid(*argv, timeout=TIMEOUT)
    if done.code != 0:
        raise SystemExit(f"bench_fleet: superfluid {' '.join(argv)} failed ({done.code}): {done.stderr}")


def _fleet(work: Path, label: str, n: int, lock: Path, mirror: str) -> float:
    """Wall seconds for ``n`` fresh machines to install ``--locked --mirror mirror`` at once."""
    nodes = [machine_at(work, f"{label}-{n}-{i}") for i in range(n)]
    for node in nodes:
        shutil.copy(lock, node.cwd / "superfluid.lock")
    start = time.monotonic()
    procs = [node.popen("runtime", "install", "--locked", "--mirror", mirror) for node in nodes]
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    took = time.monotonic() - start
    failed = [(i, p.returncode, err) for i, (p, (_, err)) in enumerate(zip(procs, outs, strict=True)) if p.returncode]
    if failed:
        raise SystemExit(f"bench_fleet: {len(failed)} of {n} installs from {label} failed: {failed[0]}")
    for node in nodes:
        if node.installs("basert") != ["0.4.0-cpu"]:
            raise SystemExit(f"bench_fleet: {node.home} holds {node.installs('basert')}")
    return took


class _Static:
    """``python -m http.server`` for a folder, its request log read back."""

    def __init__(self, root: Path, log: Path) -> None:
        self.root, self.log_path = root, log
        self.port = _free_port()
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen([sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1",
                                       "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=self._log)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("bench_fleet: python -m http.server did not start") from None
                time.sleep(0.05)
        self._seen = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def clear_log(self) -> None:
        time.sleep(0.1)
        self._log.flush()
        self._seen = self.log_path.stat().st_size

    def served(self) -> tuple[int, int]:
        """Requests and body bytes since ``clear_log`` (200s counted by the file's size)."""
        time.sleep(0.1)
        with open(self.log_path, "rb") as f:
            f.seek(self._seen)
            text = f.read().decode("utf-8", "replace")
        count = size = 0
        for m in _STATIC_LINE.finditer(text):
            count += 1
            path = self.root / m.group(2).lstrip("/").split("?", 1)[0]
            if m.group(1) == "GET" and m.group(3) == "200" and path.is_file():
                size += path.stat().st_size
        return count, size

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._log.close()


def measure(nodes: int, mb: int) -> dict[str, Any]:
    releases.build_engines()
    out: dict[str, Any] = {"nodes": nodes}
    with tempfile.TemporaryDirectory(prefix="sf-bench-fleet-") as tmp, ReleaseServer() as server:
        work = Path(tmp)
        data = releases.bundle("0.4.0", padding=mb << 20)
        server.add_release(releases.REPO, "v0.4.0", {releases.bundle_name("0.4.0", "linux-x64"): data,
                                                     "basert-engine-abi-1.txt": b"1\n"}, sha256_files=True)
        out["bundle_bytes"] = len(data)
        admin = machine_at(work, "admin", SUPERFLUID_GITHUB_API=server.url)
        _must(admin, "lock", "--runtime", "basert", "--platform", "linux-x64", "--backend", "cpu")
        lock = admin.cwd / "superfluid.lock"
        with Registry(work / "registry") as registry:
            _must(admin, "mirror", "push", registry.url)
            _must(admin, "mirror", "sync", str(work / "static"))
            static = _Static(work / "static", work / "static.log")
            try:
                server.clear_log()
                for label, url in (("registry", registry.url), ("static", static.url)):
                    one = _fleet(work, label, 1, lock, url)
                    registry.clear_log()
                    static.clear_log()
                    many = _fleet(work, label, nodes, lock, url)
                    if label == "registry":
                        log = registry.log()
                        served = (len(log), sum(a.bytes for a in log))
                        host = registry.host
                    else:
                        served = static.served()
                        host = f"127.0.0.1:{static.port}"
                    out[label] = {"host": host, "one_s": round(one, 3), "n_s": round(many, 3),
                                  "ratio": round(many / one, 2), "requests": served[0], "bytes": served[1]}
                out["release_server_requests"] = len(server.log)
            finally:
                static.stop()
    return out


def _report(r: dict[str, Any]) -> str:
    n = r["nodes"]
    lines = [f"fleet: {n} machines install --locked at once (baseRT bundle {r['bundle_bytes'] / 1e6:.1f} MB), "
             "loopback, this machine's cores"]
    lines.append(f"  {'source':<9} {'host':<16} {'1 alone':>8} {f'{n} at once':>11} {'ratio':>6} "
                 f"{'requests':>9} {'per machine':>11} {'bytes':>12} {'MB/machine':>10}")
    for label in ("registry", "static"):
        s = r[label]
        lines.append(f"  {label:<9} {s['host']:<16} {s['one_s']:>7.2f}s {s['n_s']:>10.2f}s {s['ratio']:>5.1f}x "
                     f"{s['requests']:>9} {s['requests'] / n:>11.1f} {s['bytes']:>12} {s['bytes'] / n / 1e6:>10.2f}")
    lines.append(f"  release server: {r['release_server_requests']} requests (must be 0)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--nodes", type=int, default=20, help=f"machines at once (default 20, at most {MAX_NODES})")
    ap.add_argument("--mb", type=int, default=20, help="padding of the bundle in MiB (default 20)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if not 1 <= args.nodes <= MAX_NODES:
        ap.error(f"--nodes must be 1..{MAX_NODES}")
    if shutil.which("docker-registry") is None:
        sys.stderr.write("bench_fleet: docker-registry is not installed (bash scripts/system-tools test)\n")
        return 1
    os.environ.pop("SUPERFLUID_MIRROR", None)
    r = measure(args.nodes, args.mb)
    sys.stdout.write(json.dumps(r, indent=1) + "\n" if args.json else _report(r))
    return 0 if r["release_server_requests"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
