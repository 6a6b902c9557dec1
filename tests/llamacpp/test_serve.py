"""``superfluid-worker-llamacpp serve``: a real libllama behind a real loopback HTTP server.

The worker runs as a child process on port 0; the test reads the address from its first stdout
line, talks to it over HTTP, and ends it with SIGTERM/SIGINT. The deterministic model
``always-the.gguf`` predicts `` the`` after anything, so every completion's text is known.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import cli
from tests.conftest import ROOT
from tests.serving_client import ServeProcess

pytestmark = pytest.mark.native


class Server(ServeProcess):
    """The llama.cpp worker's ``serve`` on port 0."""

    def __init__(self, lib: Path, model: Path, *flags: str) -> None:
        super().__init__([sys.executable, "-m", "superfluid.runtime.llamacpp.worker", "serve", "--lib", str(lib),
                          "--model", str(model), "--port", "0", *flags], cli.environment(), cwd=ROOT)


@pytest.fixture
def llama_serve(libllama_each: Path, gguf_models: dict[str, Path]) -> Iterator[Server]:
    """``always-the.gguf`` served by each real libllama in turn."""
    s = Server(libllama_each, gguf_models["always-the.gguf"])
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.communicate()


def prompt_tokens(lib: Path, model: Path, prompt: str) -> int:
    """How many tokens the library makes of ``prompt`` (BOS included), asked in another child."""
    argv = ["generate", str(lib / "libllama.so"), f"model={model}", f"prompt={prompt}", "n=1"]
    done = subprocess.run([sys.executable, "-m", "tests.llamacpp.scenarios", *argv], cwd=ROOT, env=cli.environment(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return len(json.loads(done.stdout)["prompt"])


def test_the_announcement_names_the_address_model_and_layout(llama_serve: Server, libllama_each: Path,
                                                             gguf_models: dict[str, Path]) -> None:
    assert llama_serve.ready["listening"] == f"http://127.0.0.1:{llama_serve.port}" and llama_serve.port > 0
    assert llama_serve.ready["model"] == "always-the"
    assert llama_serve.ready["path"] == str(gguf_models["always-the.gguf"])
    assert llama_serve.ready["layout"] == libllama_each.name
    assert llama_serve.ready["n_ctx"] == 256  # the model's trained context, under the 4096 default


def test_a_completion_is_the_models_greedy_text_with_its_usage(llama_serve: Server, libllama_each: Path,
                                                               gguf_models: dict[str, Path]) -> None:
    n_prompt = prompt_tokens(libllama_each, gguf_models["always-the.gguf"], "Once upon a time")
    for n, cached in ((1, 0), (7, n_prompt - 1)):  # the second finds the prompt held, all but its last token
        answer = llama_serve.complete(model="always-the", prompt="Once upon a time", max_tokens=n, temperature=0)
        assert answer["object"] == "text_completion" and answer["model"] == "always-the"
        assert answer["id"].startswith("cmpl-") and isinstance(answer["created"], int)
        assert answer["choices"] == [{"text": " the" * n, "index": 0, "finish_reason": "length", "logprobs": None}]
        assert answer["usage"] == {"prompt_tokens": n_prompt, "completion_tokens": n, "total_tokens": n_prompt + n,
                                   "prompt_tokens_details": {"cached_tokens": cached}}
    # defaults: 16 tokens, greedy; a prompt given as a list of one string
    default = llama_serve.complete(prompt=["Once upon a time"])
    assert default["choices"][0]["text"] == " the" * 16 and default["usage"]["completion_tokens"] == 16


def test_a_stop_string_ends_the_text_before_it(llama_serve: Server) -> None:
    answer = llama_serve.complete(prompt="x", max_tokens=10, stop=["e t", "never"])
    assert answer["choices"][0]["text"] == " th" and answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"]["completion_tokens"] == 2  # " the the" holds "e t"
    whole = llama_serve.complete(prompt="x", max_tokens=10, stop=" the the the")
    assert whole["choices"][0] == {"text": "", "index": 0, "finish_reason": "stop", "logprobs": None}
    assert whole["usage"]["completion_tokens"] == 3


def test_an_end_of_generation_token_stops_with_no_text(libllama_v2: Path, gguf_models: dict[str, Path]) -> None:
    s = Server(libllama_v2, gguf_models["always-eos.gguf"])
    try:
        answer = s.complete(prompt="x", max_tokens=10)
        assert answer["choices"][0] == {"text": "", "index": 0, "finish_reason": "stop", "logprobs": None}
        assert answer["usage"]["completion_tokens"] == 1  # the end-of-generation token itself
    finally:
        code, _, err = s.stop()
    assert code == 0, err


def test_generation_stops_when_the_context_is_full(libllama_v1: Path, gguf_models: dict[str, Path]) -> None:
    s = Server(libllama_v1, gguf_models["always-the.gguf"], "--max-context", "16")
    try:
        n_ctx = s.ready["n_ctx"]
        assert n_ctx >= 16  # llama.cpp rounds the context up (to 256 on these builds); the line says what it made
        answer = s.complete(prompt="x", max_tokens=1000)
        used = answer["usage"]
        # every position of the context is decoded; the last token generated needs none
        assert used["completion_tokens"] == n_ctx - used["prompt_tokens"] + 1
        assert answer["choices"][0]["finish_reason"] == "length"
        assert answer["choices"][0]["text"] == " the" * used["completion_tokens"]
        status, error = s.request("POST", "/v1/completions", {"prompt": "the " * n_ctx})
        assert status == 400 and "the context holds" in error["error"]["message"]
        assert error["error"]["param"] == "prompt"
    finally:
        code, _, err = s.stop()
    assert code == 0, err


def test_health_and_models(llama_serve: Server) -> None:
    assert llama_serve.request("GET", "/health") == (200, {"status": "ok"})
    status, listing = llama_serve.request("GET", "/v1/models")
    assert status == 200 and listing["object"] == "list"
    assert [(m["id"], m["object"]) for m in listing["data"]] == [("always-the", "model")]


@pytest.mark.parametrize(("body", "param", "says"), [
    (b"{not json", None, "the body is not valid JSON"),
    (b"[1, 2]", None, "the body must be a JSON object (it is a list)"),
    (b'{"max_tokens": 3}', "prompt", "'prompt' must be a string"),
    (b'{"prompt": "x", "max_tokens": 0}', "max_tokens", "'max_tokens' must be an integer of at least 1 (it is 0)"),
    (b'{"prompt": "x", "max_tokens": true}', "max_tokens", "'max_tokens' must be an integer"),
    (b'{"prompt": "x", "temperature": -0.5}', "temperature", "'temperature' must be a number from 0 to 2"),
    (b'{"prompt": "x", "temperature": 1, "top_p": 0}', "top_p", "'top_p' must be a number above 0 and at most 1"),
    (b'{"prompt": "x", "temperature": 1, "top_k": -1}', "top_k", "'top_k' must be an integer of at least 0"),
    (b'{"prompt": "x", "temperature": 1, "seed": 1.5}', "seed", "'seed' must be an integer"),
    (b'{"prompt": "x", "stop": 5}', "stop", "'stop' must be a string or a list of at most 4 strings"),
    (b'{"prompt": "x", "stream": 1}', "stream", "'stream' must be true or false"),
    (b'{"prompt": "x", "n": 2}', "n", "this server returns one choice"),
    (b'{"prompt": "x", "frequency_penalty": 1.5}', "frequency_penalty", "without penalties"),
])
def test_a_bad_request_is_a_400_with_an_error_object(llama_serve: Server, body: bytes, param: str | None,
                                                     says: str) -> None:
    status, answer = llama_serve.request("POST", "/v1/completions", body)
    assert status == 400
    error = answer["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert says in error["message"] and "Traceback" not in error["message"]
    assert llama_serve.request("GET", "/health") == (200, {"status": "ok"})  # and it keeps serving


def raw_exchange(server: Server, request: bytes) -> str:
    """Send raw bytes; everything the server answers until it closes the connection."""
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def test_wrong_paths_methods_and_framing_are_json_errors(llama_serve: Server) -> None:
    status, answer = llama_serve.request("GET", "/v1/embeddings")
    assert status == 404 and answer["error"]["code"] == "not_found"
    assert llama_serve.request("GET", "/v1/completions")[0] == 405
    assert llama_serve.request("GET", "/v1/chat/completions")[0] == 405
    assert llama_serve.request("POST", "/health", b"{}")[0] == 405
    assert llama_serve.request("DELETE", "/v1/models")[0] == 405
    # no Content-Length: refused, not read until the client gives up
    head = raw_exchange(llama_serve, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.startswith("HTTP/1.1 411 ") and '"type":"invalid_request_error"' in head
    # a request line the stdlib cannot parse is answered as JSON too
    head = raw_exchange(llama_serve, b"NONSENSE\r\n\r\n")
    assert head.startswith("HTTP/1.1 400 ") and '{"error":' in head


def test_concurrent_requests_are_each_answered_in_full(llama_serve: Server) -> None:
    answers: list[dict[str, Any]] = []

    def ask(n: int) -> None:
        answers.append(llama_serve.complete(prompt="a b c", max_tokens=n))

    threads = [threading.Thread(target=ask, args=(n,)) for n in (3, 5, 8, 13)]
    for t in threads:
        t.start()
    assert llama_serve.request("GET", "/health") == (200, {"status": "ok"})
    for t in threads:
        t.join(60)
    assert sorted(a["choices"][0]["text"] for a in answers) == sorted(" the" * n for n in (3, 5, 8, 13))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_closes_the_server_cleanly(llama_serve: Server, sig: int) -> None:
    assert llama_serve.complete(prompt="x", max_tokens=2)["choices"][0]["text"] == " the the"
    code, out, err = llama_serve.stop(sig)
    assert code == 0 and out == "" and err == ""
    with pytest.raises(OSError):
        socket.create_connection((llama_serve.host, llama_serve.port), timeout=5).close()


def test_sigterm_during_a_generation_answers_503_and_exits_0(libllama_v1: Path, gguf_models: dict[str, Path]) -> None:
    s = Server(libllama_v1, gguf_models["always-the.gguf"], "--max-context", "8192")
    result: list[tuple[int, dict[str, Any]]] = []
    asking = threading.Thread(target=lambda: result.append(
        s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 8000})))
    asking.start()
    time.sleep(1.0)
    start = time.monotonic()
    code, _, err = s.stop()
    asking.join(30)
    assert code == 0, err
    assert time.monotonic() - start < 10  # it did not wait for 8000 tokens
    assert result and result[0][0] == 503
    assert result[0][1]["error"] == {"message": "the server is shutting down", "type": "server_error",
                                     "param": None, "code": None}


def serve_once(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "superfluid.runtime.llamacpp.worker", "serve", *map(str, args)],
                          cwd=ROOT, env=cli.environment(), capture_output=True, text=True, timeout=120)


def test_a_model_that_does_not_load_exits_3(libllama_v2: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    done = serve_once("--lib", libllama_v2, "--model", missing, "--port", "0")
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr == f"superfluid-worker-llamacpp: model load failed: {missing} does not exist\n"
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 64)  # the magic, then nonsense
    done = serve_once("--lib", libllama_v2, "--model", bad, "--port", "0")
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith(f"superfluid-worker-llamacpp: model load failed: {bad}: llama.cpp could not load")


@pytest.mark.parametrize(("argv", "message"), [
    (["--port", "0"], "serve needs --model PATH"),
    (["--model", "m.gguf", "--bogus", "1"], "unknown flag --bogus"),
    (["--model", "m.gguf", "--port", "65536"], "--port '65536': expected an integer from 0 to 65535"),
    (["--model", "m.gguf", "--port", "1", "--port", "2"], "--port is given twice"),
    (["--model", "m.gguf", "--threads", "0"], "--threads '0': expected an integer from 1 to 1024"),
    (["--model"], "--model needs a value"),
])
def test_a_bad_serve_line_exits_2_before_loading_anything(argv: list[str], message: str) -> None:
    done = serve_once(*argv)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"superfluid-worker-llamacpp: {message}"), done.stderr


def test_no_library_or_a_taken_port_exits_1(libllama_v1: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    done = serve_once("--lib", tmp_path / "nope", "--model", gguf_models["always-the.gguf"])
    assert done.returncode == 1 and "does not exist" in done.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = serve_once("--lib", libllama_v1, "--model", gguf_models["always-the.gguf"], "--port", str(port))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"superfluid-worker-llamacpp: cannot listen on 127.0.0.1:{port}: ")
