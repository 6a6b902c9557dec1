"""Continuous batching in ``superfluid-worker-llamacpp serve``, on each real libllama (v1 and v2).

The worker runs as a child process on port 0 and is asked over loopback HTTP, as in
``test_serve.py``; what it did is read from its ``GET /metrics`` (decode steps by the sequences each
decoded, the sequences busy, prompt tokens decoded or found cached) and from each answer's
``usage.prompt_tokens_details.cached_tokens``. ``tiny-f32.gguf`` has random weights, so its greedy
text depends on every logit: the same text alone and together means batched decoding changed none
that mattered.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.llamacpp.batching import common_prefix
from tests import cli
from tests.conftest import ROOT
from tests.llamacpp.test_serve import Server
from tests.serving_client import ServeProcess, SuperfluidServe

pytestmark = pytest.mark.native

PROMPTS = ["the cat sat", "hello world", "a dog is on the mat", "the mat and the cat", "hello", "on the",
           "is a cat", "the dog and the cat sat on the mat"]


def metrics(server: ServeProcess) -> dict[str, float]:
    """``GET /metrics``, each sample by its name and labels."""
    _, raw = _get(server, "/metrics")
    out: dict[str, float] = {}
    for line in raw.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _get(server: ServeProcess, path: str) -> tuple[int, str]:
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200 ") and "Content-Type: text/plain; version=0.0.4" in head, head
    return 200, body


def until(done: Callable[[], bool], seconds: float = 20) -> None:
    end = time.monotonic() + seconds
    while not done() and time.monotonic() < end:
        time.sleep(0.02)
    assert done()


def texts(server: Server, prompts: list[str], *, together: bool, **body: Any) -> list[str]:
    """Each prompt's greedy completion, asked one after another or all at once."""
    out: dict[int, str] = {}

    def ask(i: int) -> None:
        out[i] = server.complete(prompt=prompts[i], max_tokens=24, **body)["choices"][0]["text"]

    if together:
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    else:
        for i in range(len(prompts)):
            ask(i)
    return [out[i] for i in range(len(prompts))]


@pytest.fixture
def llama_served(libllama_each: Path, gguf_models: dict[str, Path]) -> Iterator[Callable[..., Server]]:
    """``serve`` of a tiny model by each real libllama in turn, with these flags; stopped after the test."""
    started: list[Server] = []

    def start(model: str, *flags: str) -> Server:
        started.append(Server(libllama_each, gguf_models[model], *flags))
        return started[-1]

    yield start
    for s in started:
        s.close()


def test_concurrent_requests_share_decode_steps_and_answer_as_alone(llama_served: Callable[..., Server],
                                                                    libllama_each: Path) -> None:
    alone = llama_served("tiny-f32.gguf", "--parallel", "1")
    assert alone.ready["parallel"] == 1
    single = texts(alone, PROMPTS, together=False)
    assert metrics(alone)['superfluid_decode_steps_total{sequences="1"}'] > 0
    assert set(metrics(alone)) >= {"superfluid_sequences"} and metrics(alone)["superfluid_sequences"] == 1
    batched = llama_served("tiny-f32.gguf")  # the default: 4 sequences
    assert batched.ready["parallel"] == 4 and batched.ready["n_ctx"] == 256  # each sequence's own context
    assert texts(batched, PROMPTS, together=True) == single  # 8 requests: 4 generate, 4 wait for a sequence
    got = metrics(batched)
    shared = sum(v for k, v in got.items() if k.startswith("superfluid_decode_steps_total") and '"1"' not in k)
    assert shared > 0 and got["superfluid_sequences"] == 4, got  # steps that decoded more than one sequence
    assert got["superfluid_sequences_busy"] == 0 and got["superfluid_generated_tokens_total"] == 24 * len(PROMPTS)
    # and the same again with sampling drawn by the seed, every sequence its own chain
    seeded = {"temperature": 0.9, "top_k": 40, "seed": 5}
    assert texts(batched, PROMPTS[:4], together=True, **seeded) == texts(alone, PROMPTS[:4], together=False, **seeded)


def test_the_text_is_the_one_the_library_decodes_alone(llama_served: Callable[..., Server], libllama_each: Path,
                                                       gguf_models: dict[str, Path]) -> None:
    """Against ``llama_batch_get_one`` and greedy sampling in a plain context (``drive.Context.generate``)."""
    done = subprocess.run([sys.executable, "-m", "tests.llamacpp.scenarios", "generate",
                           str(libllama_each / "libllama.so"), f"model={gguf_models['tiny-f32.gguf']}",
                           f"prompt={PROMPTS[0]}", "n=24"], cwd=ROOT, env=cli.environment(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    expected = json.loads(done.stdout)["text"]
    server = llama_served("tiny-f32.gguf")
    assert texts(server, PROMPTS[:4], together=True)[0] == expected


def test_a_cancelled_stream_frees_its_sequence_for_the_next_request(llama_served: Callable[..., Server]) -> None:
    server = llama_served("always-the.gguf", "--parallel", "1", "--queue", "0", "--max-context", "16384")
    sock = socket.create_connection((server.host, server.port), timeout=30)
    body = json.dumps({"prompt": "x", "max_tokens": 16000, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    seen = b""
    while b"data: " not in seen:  # streaming
        seen += sock.recv(65536)
    assert metrics(server)["superfluid_sequences_busy"] == 1
    sock.close()  # the client goes away
    until(lambda: metrics(server)["superfluid_sequences_busy"] == 0)
    assert metrics(server)["superfluid_generated_tokens_total"] < 16000
    answer = server.complete(prompt="y", max_tokens=3)  # the one sequence is free: no 503
    assert answer["choices"][0]["text"] == " the" * 3


def test_a_shared_prefix_is_reused_and_only_the_rest_decoded(llama_served: Callable[..., Server]) -> None:
    server = llama_served("tiny-f32.gguf", "--parallel", "2")
    first = server.complete(prompt="hello world", max_tokens=1)["usage"]  # its sequence holds the prompt
    assert first["prompt_tokens_details"] == {"cached_tokens": 0}
    longer = server.complete(prompt="hello world the cat sat", max_tokens=24)
    assert longer["usage"]["prompt_tokens_details"] == {"cached_tokens": first["prompt_tokens"]}
    got = metrics(server)
    assert got["superfluid_prompt_tokens_cached_total"] == first["prompt_tokens"]
    assert got["superfluid_prompt_tokens_total"] == first["prompt_tokens"] + longer["usage"]["prompt_tokens"]
    # the text is the one a sequence that held nothing makes
    fresh = llama_served("tiny-f32.gguf", "--parallel", "1")
    assert fresh.complete(prompt="hello world the cat sat", max_tokens=24)["choices"] == longer["choices"]


def test_superfluid_serve_forwards_parallel_to_the_worker(libllama_v2: Path, gguf_models: dict[str, Path],
                                                          tmp_path: Path) -> None:
    model = gguf_models["tiny-f32.gguf"]
    server = SuperfluidServe([cli.script("superfluid"), "serve", "--port", "0", "--model", str(model),
                              "--llamacpp-lib", str(libllama_v2), "--llamacpp-parallel", "2"],
                             cli.environment(tmp_path / "home"))
    try:
        assert metrics(server)["superfluid_sequences"] == 2
        assert server.complete(prompt="hello", max_tokens=3)["usage"]["completion_tokens"] == 3
    finally:
        code, _, err = server.stop()
    assert code == 0, err


@pytest.mark.parametrize(("flag", "value"), [("--parallel", "0"), ("--parallel", "257"),
                                             ("--llamacpp-parallel", "x")])
def test_a_parallel_out_of_range_exits_2_naming_the_flag(flag: str, value: str) -> None:
    done = subprocess.run([sys.executable, "-m", "superfluid.runtime.llamacpp.worker", "serve", "--model", "m.gguf",
                           flag, value], cwd=ROOT, env=cli.environment(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"superfluid-worker-llamacpp: {flag} '{value}': expected an integer from 1 to 256\n"


def test_serve_checks_parallel_and_runtime_options_says_who_batches(tmp_path: Path) -> None:
    env = cli.environment(tmp_path / "home")
    r = cli.run("superfluid", "serve", "--model", tmp_path / "m.gguf", "--llamacpp-parallel", "0", env=env)
    assert r.code == 2 and "--llamacpp-parallel '0': expected an integer from 1 to 256" in r.stderr
    listed = cli.run("superfluid", "runtime", "options", "llamacpp", "--json", env=env)
    assert listed.code == 0
    parallel = next(o for o in json.loads(listed.stdout) if o["name"] == "parallel")
    assert (parallel["type"], parallel["default"], parallel["minimum"], parallel["maximum"]) == ("int", 4, 1, 256)
    text = cli.run("superfluid", "runtime", "options", "llamacpp", env=env).stdout
    assert any(line.split()[:3] == ["parallel", "4", "an"] for line in text.splitlines()), text
    assert text.endswith("on serve, up to --llamacpp-parallel requests (default 4) are decoded together, one step "
                         "for all\n")
    for other in ("basert", "mlx"):  # engines that run one generation at a time say so
        text = cli.run("superfluid", "runtime", "options", other, env=env).stdout
        assert text.endswith(f"on serve, the {other} runtime answers one request at a time: the others wait for it "
                             f"(serve --queue N)\n"), text


@pytest.mark.parametrize(("a", "b", "shared"), [
    pytest.param([], [1, 2], 0, id="nothing-held"),
    pytest.param([1, 2, 3], [1, 2, 3], 3, id="the-same"),
    pytest.param([1, 2, 3, 9, 9], [1, 2, 3, 4], 3, id="held-more-then-apart"),
    pytest.param([1, 2], [1, 2, 3, 4], 2, id="a-prefix-of-the-prompt"),
    pytest.param([5, 2, 3], [1, 2, 3], 0, id="apart-from-the-first"),
])
def test_common_prefix(a: list[int], b: list[int], shared: int) -> None:
    assert common_prefix(a, b) == shared


_SEQUENCES = textwrap.dedent("""
    import json, os, sys
    from superfluid.runtime.kernel.lookup import read
    from superfluid.runtime.llamacpp import serve
    from superfluid.runtime.serving.engine import Feed
    line = serve.parse_serve(["--lib", sys.argv[1], "--model", sys.argv[2], "--parallel", "4"])
    engine = serve._load(line, read(os.environ))
    prompts = [engine.tokenize(p) for p in ("the cat sat", "hello world", "a dog is on the mat")]
    out = {"fresh": engine.pick(prompts[0], [3, 1, 2])}
    alone = []
    for p in prompts:  # each decoded alone in sequence 0, emptied between
        engine.end(0, keep=False)
        engine.begin(0, p, None)
        alone.append(engine.step([Feed(0, p, True)])[0])
    engine.end(0, keep=False)
    for seq, p in zip((3, 0, 2), prompts):
        engine.begin(seq, p, None)
    out["together"] = engine.step([Feed(3, prompts[0], True), Feed(0, prompts[1], True), Feed(2, prompts[2], True)])
    out["alone"] = alone
    out["held"] = engine.pick(prompts[2] + prompts[0], [0, 1, 2, 3])
    other = engine.tokenize("is on")
    out["least_recent"] = engine.pick(other, [0, 1, 2, 3])  # none busy: 1 never began
    out["beside"] = engine.pick(other, [2, 3])  # 0 and 1 busy: 2 keeps them side by side
    out["hole"] = engine.pick(other, [1, 3])  # 0 and 2 busy: 1 fills the hole between them
    out["full"] = [engine.full(s) for s in range(4)]
    engine.close()
    print(json.dumps(out))
""")


def test_a_step_in_any_order_draws_each_sequences_own_token(libllama_each: Path,
                                                             gguf_models: dict[str, Path]) -> None:
    """Feeds of sequences 3, 0, 2 (decoded in the order of their ids, one micro-batch) give each the
    token it draws alone, in the order of the feeds; a prompt takes the sequence holding its prefix,
    else a free one beside the busy ones, else the least recently begun."""
    done = subprocess.run([sys.executable, "-c", _SEQUENCES, str(libllama_each), str(gguf_models["tiny-f32.gguf"])],
                          cwd=ROOT, env=cli.environment(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["together"] == got["alone"]
    assert (got["fresh"], got["held"], got["full"]) == (1, 2, [False] * 4)
    assert (got["least_recent"], got["beside"], got["hole"]) == (1, 2, 1)
