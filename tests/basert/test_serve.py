"""``superfluid-worker-basert serve``: the reference engine behind a real loopback HTTP server.

The worker runs as a child process on port 0; the test reads the address from its first stdout
line, talks to it over HTTP, and ends it with SIGTERM/SIGINT. The tiny model continues any of its
words greedily to the end of its sentence, so every completion's text is known; the token counts
are checked against the engine's own tokenizer, asked in this process.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from basert_helpers import WORKER, lib_path

from superfluid.runtime.basert.loader import load_library
from superfluid.runtime.basert.model import Model
from tests import cli
from tests.serving_client import ServeProcess

PROG = "superfluid-worker-basert"
COMPLETION = " a time the tiny reference engine spoke plainly and stopped"


class Server(ServeProcess):
    """The basert worker's ``serve`` on port 0 (its replies name the worker in ``Server``)."""

    def __init__(self, env: dict[str, str], lib: Path, model: Path, *flags: str) -> None:
        assert WORKER.exists(), f"{WORKER} is missing: install the package (scripts/setup-env)"
        super().__init__([str(WORKER), "serve", "--basert-lib", str(lib), "--model", str(model), "--port", "0", *flags],
                         env)

    def request(self, method: str, path: str, body: bytes | dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        resp, raw = self.raw(method, path, body, headers)
        assert resp.getheader("Server", "").startswith(PROG)
        return resp.status, json.loads(raw)


@pytest.fixture(params=["0.4.0", "0.3.1", "0.3.0"])
def variant(request: pytest.FixtureRequest) -> str:
    """Each reference engine this build drives: by size (0.4.0), by value (0.3.1), unnumbered (0.3.0)."""
    return str(request.param)


@pytest.fixture
def basert_serve(engines: Path, tiny_model: Path, clean_env: dict[str, str], variant: str) -> Iterator[Server]:
    """The basert worker's ``serve`` of the tiny model on each reference engine in turn."""
    s = Server(clean_env, lib_path(engines, variant).parent, tiny_model)
    yield s
    s.close()


def prompt_tokens(engines: Path, variant: str, model: Path, prompt: str) -> int:
    """The engine's own count: its beginning-of-text token and its tokens of ``prompt``."""
    with Model.load(load_library(str(lib_path(engines, variant))), str(model)) as m:
        return 1 + len(m.encode(prompt))


def test_the_announcement_names_the_address_model_and_library(basert_serve: Server, engines: Path, tiny_model: Path,
                                                              variant: str) -> None:
    path = lib_path(engines, variant)
    assert basert_serve.ready == {
        "listening": f"http://127.0.0.1:{basert_serve.port}", "model": "tiny", "path": str(tiny_model),
        "runtime": variant, "abi": None if variant == "0.3.0" else 1,
        "config_read": "into" if variant == "0.4.0" else "by-value", "library": str(path),
        "n_ctx": 128,  # the model's max_seq_len, through config_of
        "parallel": 1}  # baseRT runs one generation at a time: the others wait for it
    assert basert_serve.port > 0


def test_a_completion_is_the_engines_greedy_text_with_its_usage(basert_serve: Server, engines: Path, tiny_model: Path,
                                                                variant: str) -> None:
    n_prompt = prompt_tokens(engines, variant, tiny_model, "once upon")
    assert n_prompt == 3
    answer = basert_serve.complete(model="tiny", prompt="once upon", max_tokens=64, temperature=0)
    assert answer["object"] == "text_completion" and answer["model"] == "tiny"
    assert answer["id"].startswith("cmpl-") and isinstance(answer["created"], int)
    assert answer["choices"] == [{"text": COMPLETION, "index": 0, "finish_reason": "stop", "logprobs": None}]
    # ten words, then the end token, which counts and adds no text
    assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 11, "total_tokens": 14,
                               "prompt_tokens_details": {"cached_tokens": 0}}
    short = basert_serve.complete(prompt=["once upon"], max_tokens=3)
    assert short["choices"][0]["text"] == " a time the" and short["choices"][0]["finish_reason"] == "length"
    assert short["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6,
                              "prompt_tokens_details": {"cached_tokens": 0}}
    # the default max_tokens (16) reaches the end of the sentence; each request starts afresh
    assert (basert_serve.complete(prompt="the tiny")["choices"][0]["text"]
            == " reference engine spoke plainly and stopped")
    assert basert_serve.complete(prompt="once upon")["choices"][0]["text"] == COMPLETION


def test_the_server_says_what_the_engine_says(basert_serve: Server, engines: Path, tiny_model: Path,
                                              variant: str) -> None:
    with Model.load(load_library(str(lib_path(engines, variant))), str(tiny_model)) as model:
        for prompt, n in (("", 64), ("the tiny", 2), ("hello", 64), ("spoke", 1)):
            answer = basert_serve.complete(prompt=prompt, max_tokens=n)
            assert answer["choices"][0]["text"] == model.generate(prompt, n), prompt
            assert answer["usage"]["prompt_tokens"] == 1 + len(model.encode(prompt))


def test_a_stop_string_ends_the_text_before_it(basert_serve: Server) -> None:
    answer = basert_serve.complete(prompt="once upon", max_tokens=64, stop=["tiny", "never"])
    assert answer["choices"][0] == {"text": " a time the ", "index": 0, "finish_reason": "stop", "logprobs": None}
    assert answer["usage"]["completion_tokens"] == 4  # " tiny" completed the stop string


def test_health_and_models(basert_serve: Server) -> None:
    assert basert_serve.request("GET", "/health") == (200, {"status": "ok"})
    status, listing = basert_serve.request("GET", "/v1/models")
    assert status == 200 and listing["object"] == "list"
    assert [(m["id"], m["object"], m["owned_by"]) for m in listing["data"]] == [("tiny", "model", "basert")]
    status, answer = basert_serve.request("GET", "/v1/embeddings")
    assert status == 404 and answer["error"]["code"] == "not_found"
    assert basert_serve.request("GET", "/v1/completions")[0] == 405
    assert basert_serve.request("GET", "/v1/chat/completions")[0] == 405


@pytest.mark.parametrize(("body", "param", "says"), [
    (b"{not json", None, "the body is not valid JSON"),
    (b'{"max_tokens": 3}', "prompt", "'prompt' must be a string"),
    (b'{"prompt": "x", "max_tokens": 0}', "max_tokens", "'max_tokens' must be an integer of at least 1 (it is 0)"),
    (b'{"prompt": "x", "temperature": 0.7}', "temperature", "the basert runtime decodes greedily only"),
    (b'{"prompt": "x", "temperature": 2.5}', "temperature", "'temperature' must be a number from 0 to 2"),
    (b'{"prompt": "x", "stream": "yes"}', "stream", "'stream' must be true or false"),
])
def test_a_bad_request_is_a_400_with_an_error_object(engines: Path, tiny_model: Path, clean_env: dict[str, str],
                                                     body: bytes, param: str | None, says: str) -> None:
    s = Server(clean_env, lib_path(engines, "0.4.0"), tiny_model)
    try:
        status, answer = s.request("POST", "/v1/completions", body)
        assert status == 400
        assert answer["error"]["type"] == "invalid_request_error" and answer["error"]["param"] == param
        assert says in answer["error"]["message"]
        assert s.request("GET", "/health") == (200, {"status": "ok"})  # and it keeps serving
    finally:
        code, _, err = s.stop()
    assert code == 0, err


def test_a_smaller_context_ends_generation_at_its_length(engines: Path, tiny_model: Path,
                                                        clean_env: dict[str, str]) -> None:
    s = Server(clean_env, lib_path(engines, "0.4.0"), tiny_model, "--max-context", "6")
    try:
        assert s.ready["n_ctx"] == 6  # the engine caps max_seq_len at max_context
        answer = s.complete(prompt="once upon", max_tokens=64)
        # the engine feeds a token at position p only while p + 1 < 6: positions 3 and 4, then one more token
        assert answer["choices"][0] == {"text": " a time the", "index": 0, "finish_reason": "length",
                                        "logprobs": None}
        assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6,
                                   "prompt_tokens_details": {"cached_tokens": 0}}
        status, error = s.request("POST", "/v1/completions", {"prompt": "a b c d e"})
        assert status == 400 and error["error"]["param"] == "prompt"
        assert error["error"]["message"] == ("the prompt is 6 tokens; the context holds 6 (serve --max-context N), "
                                             "leaving no room to generate")
    finally:
        code, _, err = s.stop()
    assert code == 0, err


def test_concurrent_requests_are_each_answered_in_full(engines: Path, tiny_model: Path,
                                                      clean_env: dict[str, str]) -> None:
    s = Server(clean_env, lib_path(engines, "0.4.0"), tiny_model)
    answers: list[str] = []
    try:
        def ask(n: int) -> None:
            answers.append(s.complete(prompt="once upon", max_tokens=n)["choices"][0]["text"])

        threads = [threading.Thread(target=ask, args=(n,)) for n in (1, 2, 3, 4, 5, 6, 7, 8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        code, _, err = s.stop()
    words = COMPLETION.split(" ")
    assert sorted(answers) == sorted(" ".join(words[:n + 1]) for n in range(1, 9))
    assert code == 0, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_closes_the_server_cleanly(engines: Path, tiny_model: Path, clean_env: dict[str, str],
                                            sig: int) -> None:
    s = Server(clean_env, lib_path(engines, "0.4.0"), tiny_model)
    try:
        assert s.complete(prompt="once upon", max_tokens=2)["choices"][0]["text"] == " a time"
        code, out, err = s.stop(sig)
    finally:
        s.close()
    assert code == 0 and out == "" and err == ""
    with pytest.raises(OSError):
        socket.create_connection((s.host, s.port), timeout=5).close()


def serve_once(env: dict[str, str], *args: str | Path) -> cli.Run:
    return cli.run(WORKER, "serve", *args, env=env, timeout=60)


def test_a_model_that_does_not_load_exits_3(engines: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    lib = lib_path(engines, "0.4.0")
    missing = tmp_path / "missing.base"
    done = serve_once(clean_env, "--basert-lib", lib, "--model", missing, "--port", "0")
    assert done.code == 3 and done.stdout == ""
    assert done.stderr == f"{PROG}: model load failed: cannot read {missing}: No such file or directory\n"
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\0" * 64)
    done = serve_once(clean_env, "--basert-lib", lib, "--model", other, "--port", "0")
    assert done.code == 3
    assert done.stderr == (f"{PROG}: model load failed: {other} is not a baseRT model (it does not start with "
                           "BASE)\n")
    broken = tmp_path / "broken.base"
    broken.write_bytes(b"BASE\x01")  # the magic, then too little
    done = serve_once(clean_env, "--basert-lib", lib, "--model", broken, "--port", "0")
    assert done.code == 3 and done.stdout == ""
    assert done.stderr.startswith(f"{PROG}: model load failed: libbaseRT at {lib} could not load the model {broken}")


@pytest.mark.parametrize(("variant", "reason"), [
    pytest.param("0.5.0", "states ABI 2; this superfluid drives ABI 1", id="0.5.0-by-number"),
    pytest.param("0.2.6", "only the unnumbered 0.3.x line carries ABI 1", id="0.2.6-off-the-line"),
    pytest.param("missing-symbol", "lacks baseRT_decode_step", id="missing-symbol"),
])
def test_a_library_this_build_does_not_drive_exits_1(engines: Path, tiny_model: Path, clean_env: dict[str, str],
                                                     variant: str, reason: str) -> None:
    done = serve_once(clean_env, "--basert-lib", lib_path(engines, variant), "--model", tiny_model, "--port", "0")
    assert done.code == 1 and done.stdout == ""
    assert done.stderr.startswith(f"{PROG}: libbaseRT at {lib_path(engines, variant)}") and reason in done.stderr


def test_no_library_or_a_taken_port_exits_1(engines: Path, tiny_model: Path, clean_env: dict[str, str],
                                           tmp_path: Path) -> None:
    done = serve_once(clean_env, "--basert-lib", tmp_path / "nope", "--model", tiny_model)
    assert done.code == 1
    assert done.stderr.startswith(f"{PROG}: --basert-lib names {tmp_path / 'nope'}, which does not exist")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = serve_once(clean_env, "--lib", lib_path(engines, "0.4.0"), "--model", tiny_model, "--port", str(port))
    assert done.code == 1 and done.stdout == ""
    assert done.stderr.startswith(f"{PROG}: cannot listen on 127.0.0.1:{port}: ")


@pytest.mark.parametrize(("argv", "message"), [
    (["--port", "0"], "serve needs --model PATH"),
    (["--model", "m.base", "--bogus", "1"], "unknown flag --bogus"),
    (["--model", "m.base", "--port", "65536"], "--port '65536': expected an integer from 0 to 65535"),
    (["--model", "m.base", "--port", "1", "--port", "2"], "--port is given twice"),
    (["--model", "m.base", "--kv-bits", "3"], "--kv-bits '3': expected one of 0, 4, 8, 16, 84"),
    (["--model", "m.base", "--max-context", "0"], "--max-context '0': expected an integer from 1 to 16777216"),
    (["--model", "m.base", "--basert-lib", "a", "--lib", "b"], "--basert-lib and --lib name the same library"),
    (["--model", "m.base", "--basert-kv-bits", "3"], "--basert-kv-bits '3': expected one of 0, 4, 8, 16, 84"),
    (["--model"], "--model needs a value"),
])
def test_a_bad_serve_line_exits_2_before_loading_anything(clean_env: dict[str, str], argv: list[str],
                                                          message: str) -> None:
    done = serve_once(clean_env, *argv)
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.startswith(f"{PROG}: {message}"), done.stderr


@pytest.mark.parametrize("flag", ["--kv-bits", "--basert-kv-bits"])
def test_kv_bits_is_taken(engines: Path, tiny_model: Path, clean_env: dict[str, str], flag: str) -> None:
    s = Server(clean_env, lib_path(engines, "0.4.0"), tiny_model, flag, "8")
    try:
        assert s.complete(prompt="once upon", max_tokens=64)["choices"][0]["text"] == COMPLETION
    finally:
        code, _, err = s.stop()
    assert code == 0, err


def test_keep_alive_answers_are_not_held_back(basert_serve: Server) -> None:
    """Headers and body go out in two writes: with Nagle's algorithm on, a keep-alive client's
    delayed ACK held each answer back by ~40 ms (50 requests: 2 s and more)."""
    conn = http.client.HTTPConnection(basert_serve.host, basert_serve.port, timeout=30)
    try:
        start = time.monotonic()
        for _ in range(50):
            conn.request("POST", "/v1/completions", body=b'{"prompt": "once upon", "max_tokens": 2}',
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["choices"][0]["text"] == " a time"
        elapsed = time.monotonic() - start
    finally:
        conn.close()
    assert elapsed < 1.0, f"50 keep-alive completions took {elapsed:.2f} s"
