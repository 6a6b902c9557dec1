"""Serving speed against the engine's own server: ``superfluid serve`` over llama.cpp's ``llama-server``.

Both serve the same GGUF with the same libllama: ``llama-server`` is built from the sdist tree the
``v2`` libllama is built from (``tests/native/build_llama_server.py``, once, cached beside the
libllama builds) and loads that very ``libllama.so.0`` (its RUNPATH; checked with ``ldd`` here);
``superfluid serve`` is given the same directory with ``--llamacpp-lib``. Same context per sequence
(``--ctx``), same threads (``--threads``, for generation and prompt). ``llama-server`` runs twice, with
``-np 1`` and with ``-np P`` (``--parallel``, default 4: its batching); ``superfluid serve`` gets
``--llamacpp-parallel P`` when its ``--help`` lists that option, else runs as it is.

Each round starts each server afresh (the order alternates between rounds, so that machine noise
hits all alike) and measures, greedy (``temperature: 0``), ``--tokens`` tokens per completion (the
benchmark models' text never ends, so every answer has exactly that many; ``usage`` is checked):

- **cold start**: from process start to the first answered completion (one token); the first round's
  superfluid starts in a fresh home, later rounds restart the same line, whose worker ``superfluid serve``
  starts ahead of its own decision (``superfluid.serve_ahead``): the median is a restart, and the first
  start is printed beside it;
- **single stream**: tokens/s of one ``/v1/completions`` after a warm-up one (the median of three);
- **time to first token**: a streamed completion, from the request to the first chunk with text
  (the median of three);
- **4 and 16 concurrent streams**: that many completions sent at once (threads, distinct prompts):
  aggregate tokens/s (all tokens over the wall time of the burst) and p50/p99 request latency;
- **peak RSS of the process tree**: the server and every descendant, VmRSS summed, sampled from
  ``/proc`` every 20 ms over the server's whole life (shared pages of a file two processes map count
  twice, as the target means them to); the kernel's exact peak of the largest single process
  (``wait4``'s ``ru_maxrss``) is reported beside it;
- **greedy outputs**: every text superfluid gives a prompt (streamed or not, alone or concurrent) must
  be the one ``llama-server -np 1`` gives it, or under concurrency one ``llama-server -np P`` gave under
  concurrency (llama.cpp's batched decode is not bit-identical to its one-at-a-time decode; the run
  says where the engine's own server drifts).

On a busy machine (a load average above its CPUs) the engines' threads wait for one another: with
more than one thread each the figures measure that contention (a tenth of the speed, and runs ten
times as long); ``--threads 1`` still compares the servers, and the run says so. A measure whose
rounds are more than 2x apart is listed as unstable.

Prints the medians over ``--runs`` rounds, superfluid over llama-server as ratios for both columns, and
each target of issue 45 judged against the ``-np P`` column; ``--json`` prints the same for machines.
Exit 1 when a target fails. The machine's load average is printed: other work skews the figures.

Models (``--model``): ``big`` (default; random weights, 12 layers, dim 768, f16), ``vocab128k`` (the
same with Llama 3's 128,256-token vocabulary: any per-token cost over the vocabulary shows), ``small``
(the tests' ``always-the.gguf``: overhead-dominated), or a path to a GGUF whose greedy text does not end.

Usage: ``python benchmarks/bench_serve.py [--model big|vocab128k|small|PATH] [--runs N] [--tokens N]
[--parallel P] [--threads T] [--ctx N] [--quick] [--installed] [--json]``. ``--quick`` is one round of 32 tokens (a
minute here); ``--installed`` measures superfluid as a user installs it, a wheel of this checkout in a venv of its
own (the development venv's editable install puts an import finder in front of every interpreter's start).
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))

#: distinct prompts of the tiny vocabulary's words; a burst of N streams sends N of them in turn
PROMPTS = ("Once upon a time", "the cat sat on the mat", "hello world", "a dog is on a mat",
           "the world and the cat", "hello, the dog sat.", "is the cat on the mat?", "a world, a dog and a cat")
BURSTS = (4, 16)
SAMPLES = 3  # single-stream and streamed completions per round (their median)
UNSTABLE = 2.0  # rounds of one measure further apart than this (max over min) make its median suspect
#: prompt index -> ``"<server>, <mode>"`` -> the texts it got there (over every round)
Texts = dict[int, dict[str, set[str]]]
RSS_EVERY = 0.02  # seconds between samples of the process tree's RSS
START_TIMEOUT = 300.0  # seconds a server may take to answer its first completion
REQUEST_TIMEOUT = 600.0  # seconds one request may take (16 queued behind one another on 2 cores)

#: (metric, what it says, higher is better, the target's bound or None): judged against ``-np P``
TARGETS = (
    ("single_tps", "single stream, tokens/s", True, 0.95),
    ("ttft_s", "time to first token", False, 1.5),
    ("agg4_tps", "4 concurrent streams, aggregate tokens/s", True, 0.9),
    ("p50_4_s", "4 concurrent streams, p50 latency", False, None),
    ("agg16_tps", "16 concurrent streams, aggregate tokens/s", True, 0.9),
    ("p50_16_s", "16 concurrent streams, p50 latency", False, None),
    ("p99_16_s", "16 concurrent streams, p99 latency", False, None),
    ("cold_s", "cold start to the first answer", False, 1.5),
    ("rss_mib", "peak RSS of the process tree", False, 1.2),
)


def _script(name: str) -> ModuleType:
    """``tests/native/<name>.py`` as a module, under the key the tests load it by."""
    key = f"_sf_native_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, ROOT / "tests" / "native" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


# -- HTTP ---------------------------------------------------------------------------------------------


@dataclass
class Answer:
    """One completion as the client saw it."""

    text: str
    tokens: int
    start: float  # perf_counter at the request
    end: float  # perf_counter when the whole answer was read
    first: float | None = None  # perf_counter at the first chunk with text (streamed only)

    @property
    def seconds(self) -> float:
        return self.end - self.start


class ServerError(Exception):
    """A server refused or broke a request the benchmark needs."""


def complete(port: int, prompt: str, tokens: int, *, stream: bool = False) -> Answer:
    """One greedy ``POST /v1/completions``; the text, the completion tokens (``usage``) and the times.

    Raises:
        ServerError: the answer was not 200, or not a completion.
        OSError: the connection failed (refused while a server starts).
    """
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    try:
        start = time.perf_counter()
        conn.request("POST", "/v1/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise ServerError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
        if not stream:
            doc = json.loads(resp.read())
            return Answer(doc["choices"][0]["text"], int(doc["usage"]["completion_tokens"]), start,
                          time.perf_counter())
        return _read_stream(resp, start)
    finally:
        conn.close()


def _read_stream(resp: http.client.HTTPResponse, start: float) -> Answer:
    parts: list[str] = []
    first: float | None = None
    chunks, usage = 0, None
    while line := resp.readline():
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            break
        doc = json.loads(line[6:])
        if doc.get("usage"):
            usage = int(doc["usage"]["completion_tokens"])
        for choice in doc.get("choices") or ():
            if choice.get("text"):
                first = first or time.perf_counter()
                chunks += 1
                parts.append(choice["text"])
    else:
        raise ServerError("the stream ended without data: [DONE]")
    return Answer("".join(parts), usage if usage is not None else chunks, start, time.perf_counter(), first)


def burst(port: int, n: int, tokens: int) -> list[Answer]:
    """``n`` completions sent at once, each from its own thread, prompts in turn."""
    answers: list[Answer | BaseException | None] = [None] * n
    gate = threading.Barrier(n)

    def one(i: int) -> None:
        gate.wait()
        try:
            answers[i] = complete(port, PROMPTS[i % len(PROMPTS)], tokens)
        except (OSError, ServerError) as e:
            answers[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a in answers:
        if not isinstance(a, Answer):
            raise ServerError(f"a request of a burst of {n} failed: {a}")
    return [a for a in answers if isinstance(a, Answer)]


# -- the servers --------------------------------------------------------------------------------------


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, from the parent ids in ``/proc/<pid>/stat``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class TreeRss(threading.Thread):
    """Samples the summed RSS of a process tree until stopped; ``peak`` is the largest sum seen."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.peak, self._done = root, 0, threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, sum(_rss(p) for p in _tree(self.root)))
            self._done.wait(RSS_EVERY)

    def stop(self) -> None:
        self._done.set()
        self.join()


@dataclass(frozen=True)
class Server:
    """How to start one server under test."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    port: int  # 0: read it from the startup line on stdout (superfluid picks a free one)


@dataclass
class Started:
    """A running server: its port, its cold start and the sampler of its tree."""

    proc: subprocess.Popen[bytes]
    port: int
    cold_s: float
    rss: TreeRss
    log: Path
    max_rss_mib: float = field(default=0.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-15:])


def _port_from(log: Path, proc: subprocess.Popen[bytes], deadline: float) -> int:
    while time.monotonic() < deadline:
        found = re.search(r"http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.002)
    raise ServerError(f"the server printed no address:\n{_tail(log)}")


@contextmanager
def started(server: Server, workdir: Path) -> Iterator[Started]:
    """Start ``server``, wait for its first answered completion (the cold start), stop it after."""
    log = workdir / f"{server.name.replace(' ', '_')}.log"
    with log.open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(server.argv, env=server.env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    rss = TreeRss(proc.pid)
    rss.start()
    run = Started(proc, server.port, 0.0, rss, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        run.port = server.port or _port_from(log, proc, deadline)
        while True:
            try:
                complete(run.port, PROMPTS[0], 1)
                break
            except (OSError, ServerError) as e:  # refused while it binds, 503 while it loads
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise ServerError(f"{server.name} did not answer ({e}):\n{_tail(log)}") from e
                time.sleep(0.002)
        run.cold_s = time.perf_counter() - t0
        yield run
    finally:
        rss.stop()
        run.max_rss_mib = _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> float:
    """SIGTERM ``proc`` (SIGKILL after 30 s), reap it, kill what its process group left; the largest
    RSS of one process of its tree (``wait4``'s ``ru_maxrss``, covering the children it reaped), MiB."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    usage = None
    deadline = time.monotonic() + 30
    while usage is None:
        try:
            pid, status, got = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            proc.returncode, usage = os.waitstatus_to_exitcode(status), got
        elif time.monotonic() > deadline:
            proc.kill()
            deadline = float("inf")
        else:
            time.sleep(0.01)
    try:  # a worker the server left behind
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return usage.ru_maxrss / 1024 if usage else 0.0  # KiB on Linux


# -- one round ----------------------------------------------------------------------------------------


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def one_round(server: Server, workdir: Path, tokens: int, texts: Texts) -> dict[str, float]:
    """Every measure of one fresh ``server``; the texts each prompt got are added to ``texts``."""

    def keep(i: int, mode: str, a: Answer) -> None:
        if a.tokens != tokens:
            raise ServerError(f"{server.name} made {a.tokens} tokens, not {tokens} ({mode}); the model must not end")
        texts.setdefault(i, {}).setdefault(f"{server.name}, {mode}", set()).add(a.text)

    with started(server, workdir) as run:
        keep(0, "warm-up", complete(run.port, PROMPTS[0], tokens))
        single = [complete(run.port, PROMPTS[0], tokens) for _ in range(SAMPLES)]
        streamed = [complete(run.port, PROMPTS[0], tokens, stream=True) for _ in range(SAMPLES)]
        for a, b in zip(single, streamed, strict=True):
            keep(0, "single", a)
            keep(0, "streamed", b)
        out = {"cold_s": run.cold_s, "single_tps": tokens / statistics.median(a.seconds for a in single),
               "ttft_s": statistics.median((a.first or a.end) - a.start for a in streamed)}
        for n in BURSTS:
            answers = burst(run.port, n, tokens)
            for i, a in enumerate(answers):
                keep(i % len(PROMPTS), f"{n} concurrent", a)
            wall = max(a.end for a in answers) - min(a.start for a in answers)
            latency = [a.seconds for a in answers]
            out |= {f"agg{n}_tps": sum(a.tokens for a in answers) / wall,
                    f"p50_{n}_s": _pct(latency, 0.5), f"p99_{n}_s": _pct(latency, 0.99)}
    out |= {"rss_mib": run.rss.peak / (1 << 20), "max_process_rss_mib": run.max_rss_mib}
    return out


# -- the run ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What one run compares."""

    model: Path
    lib: Path  # the v2 libllama directory both servers load
    server_dir: Path
    tokens: int
    ctx: int
    threads: int
    parallel: int
    superfluid_bin: Path = BIN  # where ``superfluid`` and its workers are (``--installed``: a wheel's venv)


def installed(workdir: Path) -> Path:
    """The ``bin/`` of superfluid as a user installs it: this checkout's wheel (``python -m build``, as
    ``ci/pack`` builds it) in a venv of its own, its dependencies the running venv's (a ``.pth`` naming
    its site-packages: nothing fetched but the build's own requirements). The development venv's
    editable install puts setuptools' import finder (pathlib, urllib.parse, fnmatch...: 13 to 18 ms here)
    in front of every interpreter, the face's and the worker's alike; an installed wheel has none.

    Raises:
        ServerError: the build or the install failed.
    """
    dist, venv = workdir / "dist", workdir / "venv"
    steps = ([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
             [sys.executable, "-m", "venv", str(venv)])
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise ServerError(f"{' '.join(argv[:4])} failed: {(done.stderr or done.stdout)[-2000:]}")
    (wheel,) = dist.glob("*.whl")
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([str(venv / "bin" / "python"), "-c", where], capture_output=True, text=True,
                          check=True).stdout.strip()
    Path(site, "superfluid-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--disable-pip-version-check", str(wheel)], capture_output=True, text=True, timeout=900,
                          check=False)
    if done.returncode != 0:
        raise ServerError(f"pip install {wheel.name} failed: {done.stderr[-2000:]}")
    return venv / "bin"


def _superfluid_help(env: dict[str, str], bin_dir: Path) -> str:
    done = subprocess.run([str(bin_dir / "superfluid"), "serve", "--help"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    return done.stdout


def servers(setup: Setup, home: str) -> tuple[list[Server], str]:
    """The servers to compare, and how superfluid runs (with its parallel option or one at a time)."""
    sf_env = {k: v for k, v in os.environ.items() if not k.startswith(("SUPERFLUID_", "BASERT_"))}
    sf_env["SUPERFLUID_HOME"] = home
    help_text = _superfluid_help(sf_env, setup.superfluid_bin)
    t = str(setup.threads)
    sf = [str(setup.superfluid_bin / "superfluid"), "serve", "--model", str(setup.model),
          "--llamacpp-lib", str(setup.lib), "--port", "0", "--max-context", str(setup.ctx),
          "--llamacpp-threads", t, "--llamacpp-threads-batch", t]
    if "--queue" in help_text:
        sf += ["--queue", "64"]  # a burst of 16 never meets a full queue
    if "--llamacpp-parallel" in help_text:
        sf += ["--llamacpp-parallel", str(setup.parallel)]
        how = f"--llamacpp-parallel {setup.parallel}"
    else:
        how = "one generation at a time (its --help lists no --llamacpp-parallel)"
    ls_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}  # its RUNPATH names the v2 build
    out = [Server("superfluid", tuple(sf), sf_env, 0)]
    for np_ in sorted({1, setup.parallel}):
        port = _free_port()
        out.append(Server(f"llama-server -np {np_}", (
            str(setup.server_dir / "llama-server"), "-m", str(setup.model), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(setup.ctx * np_), "-np", str(np_), "-t", t, "-tb", t), ls_env, port))
    return out, how


def _ratio(sf: float, ls: float) -> float:
    return sf / ls if ls else float("inf")


def judge(medians: dict[str, dict[str, float]], parallel: int, identical: bool) -> tuple[dict[str, Any], list[Any]]:
    """The ratios (superfluid over each llama-server) and each target, judged against ``-np parallel``."""
    columns = [name for name in medians if name != "superfluid"]
    ratios = {col: {m: _ratio(medians["superfluid"][m], medians[col][m]) for m, *_ in TARGETS} for col in columns}
    against = ratios[f"llama-server -np {parallel}"]
    targets: list[dict[str, Any]] = []
    for metric, words, higher, bound in TARGETS:
        if bound is not None:
            ok = against[metric] >= bound if higher else against[metric] <= bound
            targets.append({"metric": metric, "what": words, "ratio": against[metric],
                            "target": f"{'>=' if higher else '<='} {bound:g}x", "ok": ok})
    targets.append({"metric": "greedy", "what": "greedy outputs identical", "ratio": None, "target": "identical",
                    "ok": identical})
    return ratios, targets


def _difference(i: int, where: str, got: str, reference: set[str]) -> dict[str, Any]:
    """Where ``got`` (the text prompt ``i`` got at ``where``) leaves the reference text, with both around it."""
    want = min(reference) if reference else ""
    at = next((k for k, (x, y) in enumerate(zip(got, want, strict=False)) if x != y), min(len(got), len(want)))
    return {"prompt": PROMPTS[i], "from": where, "at": at, "got": got[max(0, at - 20): at + 40],
            "want": want[max(0, at - 20): at + 40]}


def greedy(texts: Texts, parallel: int) -> dict[str, Any]:
    """Judge superfluid's greedy texts against llama-server's.

    The reference of a prompt is what ``llama-server -np 1`` answered (one sequence at a time, in every
    mode). A text superfluid gave must be it, or, under concurrency, one that ``llama-server -np P``
    gave under concurrency too: llama.cpp's batched decode is not bit-identical to its one-at-a-time
    decode, so a batching server may drift from the reference, as the engine's own server does (those
    drifts are listed under ``engine_batched``, not failed). Where ``llama-server -np 1`` itself gave
    two texts (its slot reuses a cached prefix decoded in another batch), each is the reference, and
    that is listed under ``reference_unstable``, not failed: superfluid is judged against what the
    engine's own server says, not for the engine's own drift.
    """
    alone, batched = "llama-server -np 1, ", f"llama-server -np {parallel}, "
    mismatches: list[dict[str, Any]] = []
    drifts: list[dict[str, Any]] = []
    unstable: list[dict[str, Any]] = []
    for i, by in sorted(texts.items()):
        reference = {t for where, got in by.items() if where.startswith(alone) for t in got}
        engine_batched = {t for where, got in by.items() if where.startswith(batched) and "concurrent" in where
                          for t in got}
        if len(reference) > 1:
            unstable.append(_difference(i, alone + "every mode", max(reference), {min(reference)}))
        for where, got in sorted(by.items()):
            if where.startswith(batched) and batched != alone:
                drifts += [_difference(i, where, t, reference) for t in sorted(got - reference)]
            if where.startswith("superfluid, "):
                allowed = reference | (engine_batched if "concurrent" in where else set())
                mismatches += [_difference(i, where, t, reference) for t in sorted(got - allowed)]
    return {"ok": not mismatches, "mismatches": mismatches, "engine_batched": drifts, "reference_unstable": unstable}


def _spread(values: Sequence[float]) -> float:
    return max(values) / min(values) if min(values) > 0 else float("inf")


def measure(setup: Setup, runs: int) -> dict[str, Any]:
    """Every server, ``runs`` rounds in alternating order; medians, ratios and targets."""
    load_before = os.getloadavg()
    texts: Texts = {}
    with tempfile.TemporaryDirectory(prefix="sf-bench-serve-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        configs, how = servers(setup, str(home))
        rounds: dict[str, list[dict[str, float]]] = {c.name: [] for c in configs}
        for r in range(runs):
            for server in configs if r % 2 == 0 else configs[::-1]:
                rounds[server.name].append(one_round(server, Path(tmp), setup.tokens, texts))
    medians = {name: {m: statistics.median(rd[m] for rd in rs) for m in rs[0]} for name, rs in rounds.items()}
    unstable = {f"{name}: {words}": [round(rd[m], 3) for rd in rs] for name, rs in rounds.items()
                for m, words, *_ in TARGETS if _spread([rd[m] for rd in rs]) > UNSTABLE}
    same = greedy(texts, setup.parallel)
    ratios, targets = judge(medians, setup.parallel, same["ok"])
    return {"model": str(setup.model), "lib": str(setup.lib), "llama_server": str(setup.server_dir / "llama-server"),
            "tokens": setup.tokens, "ctx": setup.ctx, "threads": setup.threads, "parallel": setup.parallel,
            "superfluid": how, "superfluid_bin": str(setup.superfluid_bin),
            "runs": runs, "load_before": load_before, "load_after": os.getloadavg(),
            "busy": setup.threads > 1 and load_before[0] > (os.cpu_count() or 1),
            "rss": "VmRSS summed over the server's process tree, sampled from /proc every "
                   f"{RSS_EVERY * 1000:g} ms; max_process_rss_mib: wait4's ru_maxrss (the largest one process)",
            "medians": medians, "rounds": rounds, "ratios": ratios, "targets": targets,
            # the first round's superfluid starts in a fresh home: no worker kept from a start of the same
            # line before (superfluid.serve_ahead), as a host's first start; later rounds restart a server
            "first_cold_s": rounds["superfluid"][0]["cold_s"],
            "unstable": unstable, "greedy": same, "ok": all(t["ok"] for t in targets)}


# -- the face -----------------------------------------------------------------------------------------


def _model(name: str, make_gguf: ModuleType) -> tuple[Path, int | None]:
    """The GGUF of ``--model`` and its trained context (None when unknown)."""
    if name == "small":
        return Path(make_gguf.write_standard()["always-the.gguf"]), make_gguf.STANDARD["always-the.gguf"].ctx
    named = {"big": "bench-12x768-f16.gguf", "vocab128k": "bench-12x768-vocab128k-f16.gguf"}
    if name in named:
        return Path(make_gguf.write_bench(named[name])), make_gguf.BENCH[named[name]].ctx
    if not Path(name).is_file():
        raise SystemExit(f"bench_serve: --model: not big, vocab128k, small or a file: {name}")
    return Path(name), None


def _print(r: dict[str, Any]) -> None:
    columns = list(r["ratios"])
    load = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(r["load_before"], r["load_after"], strict=True))
    print(f"{Path(r['model']).name}: {r['tokens']} tokens per completion, context {r['ctx']} per sequence, "
          f"{r['threads']} threads, median of {r['runs']} round(s)")
    print(f"  engine: {r['lib']} (both); superfluid: {r['superfluid']}, from {r['superfluid_bin']}")
    print(f"  load average 1/5/15 min, before/after: {load}")
    if r["busy"]:
        print(f"  the machine is busy (load above its {os.cpu_count()} CPUs) and each engine runs {r['threads']} "
              "threads: they wait for one another; --threads 1 compares the servers rather than the contention")
    if r["unstable"]:
        print(f"  unstable (rounds more than {UNSTABLE:g}x apart; the machine's load interferes, try more --runs):")
        for what, values in r["unstable"].items():
            print(f"    {what}: {values}")
    names = list(r["medians"])
    print(f"\n  {'medians':<44}" + "".join(f"{n:>22}" for n in names))
    for metric, words, *_ in (*TARGETS, ("max_process_rss_mib", "largest one process, RSS (MiB)", False, None)):
        print(f"  {words:<44}" + "".join(f"{r['medians'][n][metric]:>22.3f}" for n in names))
    first = r["first_cold_s"]
    print(f"  {'superfluid, first cold start (fresh home)':<44}{first:>22.3f}   "
          f"({first / r['medians'][columns[-1]]['cold_s']:.2f}x {columns[-1]}; later starts "
          "of the same line start its worker ahead)")
    print(f"\n  {'superfluid over llama-server':<44}" + "".join(f"{c:>22}" for c in columns) + "   target")
    judged = {t["metric"]: t for t in r["targets"]}
    for metric, words, *_ in TARGETS:
        t = judged.get(metric)
        verdict = f"   {t['target']}: {'ok' if t['ok'] else 'FAIL'}" if t else ""
        print(f"  {words:<44}" + "".join(f"{r['ratios'][c][metric]:>21.2f}x" for c in columns) + verdict)
    g = judged["greedy"]
    verdict = "ok" if g["ok"] else "FAIL"
    print(f"  {'greedy outputs identical':<44}{'yes' if g['ok'] else 'NO':>22}   identical: {verdict}")
    for d in r["greedy"]["mismatches"]:
        print(f"    {d['from']}, {d['prompt']!r}: at character {d['at']}: ...{d['got']!r}, "
              f"llama-server -np 1: ...{d['want']!r}")
    drifts = r["greedy"]["engine_batched"]
    if drifts:
        first = min(d["at"] for d in drifts)
        print(f"    (llama-server -np {r['parallel']} itself, under concurrency, left its one-at-a-time text "
              f"{len(drifts)} time(s), the first at character {first}: llama.cpp's batched decode is not "
              "bit-identical)")
    for d in r["greedy"]["reference_unstable"]:
        print(f"    (llama-server -np 1 itself gave two texts for {d['prompt']!r}, apart at character {d['at']}: "
              f"...{d['got']!r} and ...{d['want']!r}; each is the reference)")
    print(f"\n  targets judged against llama-server -np {r['parallel']}: "
          + ("all hold" if r["ok"] else "some FAIL"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="big", help="big, vocab128k, small, or a GGUF file (default big)")
    parser.add_argument("--runs", type=int, help="rounds; the median of each measure (default 3; --quick: 1)")
    parser.add_argument("--tokens", type=int, help="tokens per completion (default 128; --quick: 32)")
    parser.add_argument("--parallel", type=int, default=4, help="llama-server's -np P column and superfluid's "
                        "--llamacpp-parallel when it has one (default 4)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads of both engines")
    parser.add_argument("--ctx", type=int, default=512, help="context per sequence (default 512)")
    parser.add_argument("--quick", action="store_true", help="one round of 32 tokens (unless --runs, --tokens say)")
    parser.add_argument("--installed", action="store_true", help="superfluid as a user installs it: this checkout's "
                        "wheel in a venv of its own (the development venv's editable install adds an import finder "
                        "to every interpreter's start)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.runs = args.runs if args.runs is not None else 1 if args.quick else 3
    args.tokens = args.tokens if args.tokens is not None else 32 if args.quick else 128
    if args.runs < 1 or args.parallel < 1 or args.threads < 1:
        parser.error("--runs, --parallel and --threads: at least 1")
    build_libllama, build_server = _script("build_libllama"), _script("build_llama_server")
    model, trained = _model(args.model, _script("make_gguf"))
    ctx = min(args.ctx, trained) if trained else args.ctx
    if not 1 <= args.tokens <= ctx - 32:
        parser.error(f"--tokens: 1 to {ctx - 32} (the context is {ctx}, prompts take up to 32)")
    if not build_server.is_current():
        print("bench_serve: building llama-server once (about 18 minutes on 2 cores)...", file=sys.stderr)
    try:
        server_dir = Path(build_server.build())
        lib = build_libllama.layout_dir(build_server.ENGINE)
        build_server.check_links(server_dir, lib)
    except build_libllama.BuildFailed as e:
        raise SystemExit(f"bench_serve: {e}") from e
    with tempfile.TemporaryDirectory(prefix="sf-bench-installed-") as tmp:
        try:
            bin_dir = installed(Path(tmp)) if args.installed else BIN
            r = measure(Setup(model, lib, server_dir, args.tokens, ctx, args.threads, args.parallel, bin_dir),
                        args.runs)
        except ServerError as e:
            raise SystemExit(f"bench_serve: {e}") from e
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        _print(r)
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
