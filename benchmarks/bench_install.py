"""Install speed against three baselines on two payloads, the phases of an install, and the cost of a
warm ``--dry-run``.

1. Two baseRT bundles (the reference engine built with ``tests/end_to_end/releases.py``'s ``bundle``)
   are published, each on its own loopback release server:

   - *incompressible*: the engine plus ~200 MiB of incompressible padding (gzip stores it, so
     inflating it costs almost nothing: this measures the network, hashing and the disk);
   - *real libraries*: the engine plus ~200 MB of real shared libraries, as engine releases are
     made: the libllama/ggml builds of the native cache (``.cache/native/llamacpp``), then the
     system's libraries (``/usr/lib``, ``/lib`` ...), walked in sorted order, ELF files only, no
     link followed, a file whose bytes came earlier dropped, one that would not load from the bundle
     skipped, until the size is reached (``_library_files``): deterministic per machine (Linux).
     They compress about 3x, so inflating them is most of the work.

   Four contenders run as real subprocesses, interleaved (their order rotated every round, so that
   machine noise and the page cache hit all alike), and the min, median and max of each are printed.
   Fairly: every contender starts after ``sync`` with nothing left to write back, and what the one
   before it wrote is dropped from the page cache (``posix_fadvise(DONTNEED)``) before it is
   removed, so nobody pays for another's dirty pages:

   - ``superfluid runtime install basert --mirror <server>`` into a fresh ``SUPERFLUID_HOME``
     (cold cache: listing, ABI asset, ``.sha256``, the download hashed, cached and extracted in
     one pass, every member judged, the probe in a worker, publish);
   - the minimal Python loop: ``requests`` streaming the bundle into a file through ``hashlib``,
     then ``tarfile`` extracting it (no checks at all);
   - the shell pipeline ``curl -s URL | tee FILE | sha256sum`` then ``tar xzf FILE``;
   - the floor: GNU ``tar xzf`` of the same archive already on disk (its pages in the cache), that
     is extraction alone: no download, no hashing, no checks.

   Targets (medians): on the incompressible bundle the install at most 0.9x the minimal loop and at
   most 0.4x the pipeline; on the real libraries at most 0.5x the minimal loop and at most 0.7x the
   floor.
2. The phases of the median install of each payload, as the installer itself records them
   (``--timings``: start (interpreter, imports, command line), listing, download, extract, probe,
   publish), and the inflater in use (``superfluid.installer.unpack.inflate.INFLATER``).
3. The HTTP requests of a warm ``runtime install basert --dry-run`` (a second one in the same home),
   from the server's log: the listing should cost one conditional request (a 304, no body).

Run by hand (``scripts/bench``), never in CI. Bounded: every subprocess has a timeout and no round
starts after ``--budget`` seconds once the least rounds are done. Usage:
``python benchmarks/bench_install.py [--runs N] [--mb M] [--real-mb M] [--budget S] [--json]``; exit 1 when a
target is missed, or with fewer than 7 rounds (a look while developing, never a verdict).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from superfluid.installer.unpack.inflate import INFLATER  # noqa: E402
from superfluid.runtime.hostfacts import elf  # noqa: E402
from superfluid.runtime.hostfacts.elf import is_elf  # noqa: E402
from superfluid.runtime.hostfacts.host import detect  # noqa: E402
from superfluid.runtime.hostfacts.needs import GLIBC_LIBRARIES, is_shared_object  # noqa: E402
from tests.end_to_end import releases  # noqa: E402
from tests.release_server import ReleaseServer  # noqa: E402

BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))
#: per payload, the most the install may take as a share of each baseline (medians)
TARGETS: dict[str, dict[str, float]] = {"incompressible": {"minimal": 0.9, "pipeline": 0.4},
                                        "real libraries": {"minimal": 0.5, "floor": 0.7}}
MIN_RUNS = 7
TIMEOUT = 180.0  # seconds one contender may take
#: where the real-libraries payload's system libraries are read from, in this order (those that exist)
_SYSTEM_LIBS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib")

#: the minimal Python loop: download through SHA-256 into a file, then extract; no checks at all
MINIMAL = """\
import hashlib, sys, tarfile
import requests
url, dest = sys.argv[1], sys.argv[2]
h = hashlib.sha256()
with requests.get(url, stream=True) as r, open(dest + ".tar.gz", "wb") as f:
    for chunk in r.iter_content(1 << 20):
        h.update(chunk)
        f.write(chunk)
with tarfile.open(dest + ".tar.gz") as t:
    t.extractall(dest)
print(h.hexdigest())
"""


def _python_env(work: Path) -> dict[str, str]:
    """The environment of every Python contender: byte code compiled once and then read, as an
    installed package's is (pip compiles it at install), whatever ``PYTHONDONTWRITEBYTECODE`` says."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in _python_env(home.parent).items()
           if not k.startswith(("SUPERFLUID_", "BASERT_")) and k not in ("GITHUB_TOKEN", "GH_TOKEN")}
    env["SUPERFLUID_HOME"] = str(home)
    env["CI"] = "1"  # no progress bar
    return env


def _settle(*written: Path) -> None:
    """Leave nothing to write back: ``sync``, then drop the pages of the files in ``written`` (a
    contender's own output, before it is removed) from the page cache where the kernel allows."""
    os.sync()
    advise = getattr(os, "posix_fadvise", None)
    for top in written:
        for path in (top.rglob("*") if top.is_dir() else [top]):
            if advise is None or not path.is_file() or path.is_symlink():
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _removed(*paths: Path) -> None:
    """Each path dropped from the page cache, then removed, then the removal synced."""
    _settle(*(p for p in paths if p.exists()))
    for p in paths:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    os.sync()


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    os.sync()  # the contender starts with nothing of anyone's left to write back
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False,
                          timeout=TIMEOUT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {argv} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return elapsed, done.stdout.decode()


def _install_once(server: ReleaseServer, work: Path, i: int) -> tuple[float, list[dict[str, Any]]]:
    home = work / f"home-{i}"
    home.mkdir()
    try:
        argv = [str(BIN / "superfluid"), "runtime", "install", "basert", "--mirror", server.mirror_url,
                "--json", "--timings"]
        elapsed, out = _timed(argv, _env(home))
        return elapsed, json.loads(out).get("timings", [])
    finally:
        _removed(home)


def _minimal_once(url: str, work: Path, i: int) -> float:
    out = work / f"min-{i}"
    try:
        return _timed([str(BIN / "python"), "-c", MINIMAL, url, str(out)], _python_env(work))[0]
    finally:
        _removed(out, Path(f"{out}.tar.gz"))


def _pipeline_once(url: str, work: Path, i: int) -> float:
    out = work / f"pipe-{i}"
    out.mkdir()
    archive = out / "bundle.tar.gz"
    script = (f"set -e; curl -s {shlex.quote(url)} | tee {archive} | sha256sum >/dev/null; "
              f"mkdir {out}/x && tar xzf {archive} -C {out}/x")
    try:
        return _timed(["sh", "-c", script])[0]
    finally:
        _removed(out)


def _floor_once(archive: Path, work: Path, i: int) -> float:
    out = work / f"floor-{i}"
    out.mkdir()
    try:
        return _timed(["tar", "xzf", str(archive), "-C", str(out)])[0]
    finally:
        _removed(out)


def _warm_dry_run(server: ReleaseServer, work: Path) -> list[tuple[str, int | None]]:
    home = work / "home-dry"
    home.mkdir()
    argv = [str(BIN / "superfluid"), "runtime", "install", "basert", "--mirror", server.mirror_url, "--dry-run"]
    _timed(argv, _env(home))  # cold: fills the listing and sidecar caches
    server.clear_log()
    _timed(argv, _env(home))
    return [(r.path, r.status) for r in server.log]


def _library_files(limit: int) -> list[tuple[str, bytes]]:
    """Real shared libraries of this machine, about ``limit`` bytes of them: the native cache's
    libllama/ggml builds first, then the system's; each directory walked in sorted order, regular
    ELF files only (no link followed), a file whose bytes came earlier dropped, and one that would
    not load from the bundle skipped (the installer measures what every shared object needs: a
    library named by a path, or by a name neither on this host's library paths nor carried earlier
    in the bundle), as is one that would pass ``limit``. Answers ``(member name, bytes)`` in that
    order, deterministic per machine."""
    found = set(detect(dict(os.environ)).libraries or {}) | GLIBC_LIBRARIES
    seen: set[bytes] = set()
    names: set[str] = set()
    out: list[tuple[str, bytes]] = []
    total = 0
    for root in (releases.native_cache() / "llamacpp", *(Path(d) for d in _SYSTEM_LIBS)):
        if not root.is_dir() or root.is_symlink():
            continue
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                if total >= limit * 0.99:
                    return out
                path = Path(folder) / name
                try:
                    if (not is_shared_object(name) or path.is_symlink() or not path.is_file()
                            or total + path.stat().st_size > limit or not is_elf(path)):
                        continue
                    obj = elf.read(path)
                    if any("/" in n or n not in found for n in obj.needed):
                        continue
                    data = path.read_bytes()
                except (OSError, elf.ELFInvalid):
                    continue
                digest = hashlib.sha256(data).digest()
                if digest in seen:
                    continue
                seen.add(digest)
                member = name
                while member in names:  # one name in two folders: both kept, told apart
                    member = "_" + member
                names.add(member)
                found.update(n for n in (name, obj.soname) if n)
                out.append((f"vendor/{member}", data))
                total += len(data)
    return out


def _payloads(mb: int, real_mb: int) -> list[tuple[str, bytes]]:
    """The two bundles: ``(label, .tar.gz bytes)``."""
    libraries = _library_files(real_mb * 1_000_000)
    if not libraries:
        raise SystemExit("bench: no shared library found for the real-libraries payload")
    return [("incompressible", releases.bundle("0.4.0", padding=mb << 20)),
            ("real libraries", releases.bundle("0.4.0", extra=dict(libraries)))]


def _raw_size(data: bytes) -> int:
    """Bytes of a ``.tar.gz``'s tar, uncompressed."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    n = 0
    for i in range(0, len(data), 1 << 20):
        n += len(d.decompress(data[i:i + (1 << 20)]))
    return n + len(d.flush())


class _Payload:
    """One bundle on its own release server, with the contenders' timings."""

    def __init__(self, label: str, data: bytes, server: ReleaseServer, work: Path) -> None:
        self.label, self.data, self.server = label, data, server
        self.raw = _raw_size(data)
        name = releases.bundle_name("0.4.0")
        server.add_release(releases.REPO, "v0.4.0", {name: data, "basert-engine-abi-1.txt": b"1\n"},
                           sha256_files=True)
        self.url = server.mirror_url + f"{releases.REPO}/releases/download/v0.4.0/{name}"
        self.work = work / label.replace(" ", "-")
        self.work.mkdir()
        self.archive = self.work / name  # the floor's archive, on disk
        self.archive.write_bytes(data)
        self.install: list[tuple[float, list[dict[str, Any]]]] = []
        self.minimal: list[float] = []
        self.pipeline: list[float] = []
        self.floor: list[float] = []

    def contenders(self) -> list[Callable[[int], None]]:
        return [lambda i: self.install.append(_install_once(self.server, self.work, i)),
                lambda i: self.minimal.append(_minimal_once(self.url, self.work, i)),
                lambda i: self.pipeline.append(_pipeline_once(self.url, self.work, i)),
                lambda i: self.floor.append(_floor_once(self.archive, self.work, i))]

    def warm(self) -> None:
        """The interpreter's files, the server's pages, the byte code and the archive on disk."""
        self.archive.read_bytes()
        _minimal_once(self.url, self.work, -1)
        _install_once(self.server, self.work, -1)
        _floor_once(self.archive, self.work, -1)

    def result(self, targets: Mapping[str, float]) -> dict[str, Any]:
        walls = [w for w, _ in self.install]
        series = {"install": walls, "minimal": self.minimal, "pipeline": self.pipeline, "floor": self.floor}
        med = {k: statistics.median(v) for k, v in series.items()}
        ratios = {k: med["install"] / med[k] for k in ("minimal", "pipeline", "floor")}
        return {"label": self.label, "bundle_bytes": len(self.data), "raw_bytes": self.raw, "runs": len(walls),
                "install_s": med["install"], "minimal_s": med["minimal"], "pipeline_s": med["pipeline"],
                "floor_s": med["floor"], "ratios": ratios, "targets": dict(targets),
                "met": all(ratios[k] <= t for k, t in targets.items()),
                "all_s": series,
                "spread_s": {k: {"min": min(v), "median": med[k], "max": max(v)} for k, v in series.items()},
                "phases_of_median_install": min(self.install, key=lambda t: abs(t[0] - med["install"]))[1]}


def measure(runs: int, mb: int, real_mb: int, budget: float) -> dict[str, Any]:
    releases.build_engines()
    bundles = _payloads(mb, real_mb)
    with tempfile.TemporaryDirectory(prefix="sf-bench-install-") as tmp, ReleaseServer() as plain_server, \
            ReleaseServer() as real_server:
        work = Path(tmp)
        payloads = [_Payload(label, data, server, work)
                    for (label, data), server in zip(bundles, (plain_server, real_server), strict=True)]
        contenders = [c for p in payloads for c in p.contenders()]
        for p in payloads:
            p.warm()
        started = time.monotonic()
        for i in range(runs):
            if i >= MIN_RUNS and time.monotonic() - started > budget:
                break
            for k in range(len(contenders)):
                contenders[(i + k) % len(contenders)](i)
        requests = _warm_dry_run(plain_server, work)
    results = [p.result(TARGETS[p.label]) for p in payloads]
    return {"inflater": INFLATER, "payloads": results, "met": all(r["met"] for r in results),
            "warm_dry_run_requests": len(requests),
            "warm_dry_run_log": [{"path": p, "status": s} for p, s in requests]}


_LABELS = {"install": "superfluid runtime install", "minimal": "minimal Python loop",
           "pipeline": "curl|tee|sha256sum + tar xzf", "floor": "tar xzf of the archive on disk"}


def _report(r: dict[str, Any]) -> str:
    lines = []
    for p in r["payloads"]:
        s = p["spread_s"]
        lines += [f"install of the {p['label']} bundle ({p['bundle_bytes'] / 1e6:.0f} MB as .tar.gz, "
                  f"{p['raw_bytes'] / 1e6:.0f} MB raw), {p['runs']} interleaved rounds, each contender started "
                  "after sync (seconds):",
                  f"  {'':<37} {'min':>6} {'median':>6} {'max':>6}"]
        for key, label in _LABELS.items():
            line = f"  {label:<37} {s[key]['min']:6.2f} {s[key]['median']:6.2f} {s[key]['max']:6.2f}"
            if key != "install":
                target = p["targets"].get(key)
                line += f"   install/{key:<8} {p['ratios'][key]:.2f}x"
                line += f" (target <= {target}x)" if target is not None else ""
            lines.append(line)
        lines.append("  phases of the median install (seconds since its process started; spans may overlap):")
        for ph in p["phases_of_median_install"]:
            lines.append(f"    {ph['phase']:<9} {ph['start']:6.3f} .. {ph['end']:6.3f}  {ph['seconds']:6.3f} s")
    lines.append(f"inflater: {r['inflater']}")
    statuses = ", ".join(f"{e['status']} {e['path']}" for e in r["warm_dry_run_log"])
    lines.append(f"warm `runtime install basert --dry-run`: {r['warm_dry_run_requests']} HTTP request(s): {statuses}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=MIN_RUNS,
                    help=f"rounds (default {MIN_RUNS}; fewer is a look while developing, never a pass)")
    ap.add_argument("--mb", type=int, default=200, help="padding in MiB (default 200: a 210 MB bundle)")
    ap.add_argument("--real-mb", type=int, default=200, help="real libraries in MB (default 200)")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds after which no round starts")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs {args.runs}: at least one round")
    r = measure(args.runs, args.mb, args.real_mb, args.budget)
    print(json.dumps(r, indent=2) if args.json else _report(r))
    if args.runs < MIN_RUNS:
        print(f"bench: {args.runs} rounds, fewer than {MIN_RUNS}: a look, not a verdict", file=sys.stderr)
        return 1
    return 0 if r["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
