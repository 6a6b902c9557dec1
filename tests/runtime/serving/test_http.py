"""The HTTP server over real loopback HTTP, with a scripted engine in this process.

What goes over the wire: a stream as server-sent events ending with ``[DONE]``, a refusal as
OpenAI's error object (503 with Retry-After beyond the queue, 404 for another model), an error
event once a stream has begun, and a burst of clients answered, never reset.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from superfluid.runtime.serving.generation import Generator
from superfluid.runtime.serving.http import BACKLOG, make_server
from tests.runtime.serving.scripted_engine import BatchScript, Script


@contextmanager
def serving(engine: Script, queue: int = 16) -> Iterator[tuple[Generator, int]]:
    generator = Generator(engine, queue=queue, wait=30)
    server = make_server(generator, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield generator, int(server.server_address[1])
    finally:
        engine.asked.set()
        server.shutdown()
        server.server_close()


def post(port: int, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def events(raw: bytes) -> list[Any]:
    """The data of each server-sent event (``[DONE]`` as the string)."""
    out: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_a_stream_is_server_sent_events_of_the_runs_chunks_then_done() -> None:
    engine = Script([b" a", b"X", b"Y", b" c"])
    with serving(engine) as (_, port):
        body = {"prompt": "x", "max_tokens": 64, "stop": ["XYZ"]}
        status, headers, raw = post(port, "/v1/completions", {**body, "stream": True})
        assert status == 200 and headers["Content-Type"] == "text/event-stream"
        assert headers["Cache-Control"] == "no-cache" and headers["Transfer-Encoding"] == "chunked"
        got = events(raw)
        assert got[-1] == "[DONE]"
        chunks = got[:-1]
        assert [c["choices"][0]["text"] for c in chunks[:-1]] == [" a", "XY c"]
        assert chunks[-1]["choices"][0] == {"text": "", "index": 0, "finish_reason": "stop", "logprobs": None}
        status, headers, raw = post(port, "/v1/completions", body)
        assert status == 200 and headers["Content-Type"] == "application/json"
        whole = json.loads(raw)
        assert whole["choices"][0]["text"] == " aXY c" and whole["choices"][0]["finish_reason"] == "stop"


def test_a_chat_stream_opens_with_the_role_and_ends_with_usage() -> None:
    engine = Script([b" hi", b" there"])
    with serving(engine) as (_, port):
        status, _, raw = post(port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a b"}]}], "stream": True,
            "stream_options": {"include_usage": True}})
        got = events(raw)
    assert status == 200 and got[-1] == "[DONE]"
    assert [c["choices"][0]["delta"] for c in got[:4]] == [{"role": "assistant", "content": ""}, {"content": " hi"},
                                                          {"content": " there"}, {}]
    assert all(c["object"] == "chat.completion.chunk" and c["id"].startswith("chatcmpl-") for c in got[:-1])
    assert got[-2]["choices"] == [] and got[-2]["usage"] == {"prompt_tokens": 3, "completion_tokens": 3,
                                                             "total_tokens": 6,
                                                             "prompt_tokens_details": {"cached_tokens": 0}}


def hold(engine: Script, port: int, results: list[tuple[int, dict[str, str], bytes]]) -> threading.Thread:
    """A request that generates while the engine is held; started and waiting for the engine."""
    engine.asked.clear()
    engine.started.clear()
    t = threading.Thread(target=lambda: results.append(post(port, "/v1/completions", {"prompt": "a"})))
    t.start()
    assert engine.started.wait(10)
    return t


@pytest.mark.parametrize("queue", [0, 1])
def test_requests_beyond_the_queue_get_503_and_the_others_wait(queue: int) -> None:
    engine = Script([b"x", b"y"])
    with serving(engine, queue=queue) as (generator, port):
        first: list[tuple[int, dict[str, str], bytes]] = []
        waiting: list[tuple[int, dict[str, str], bytes]] = []
        t = hold(engine, port, first)
        waiters = [threading.Thread(target=lambda: waiting.append(post(port, "/v1/completions", {"prompt": "b"})))
                   for _ in range(queue)]
        for w in waiters:
            w.start()
        for _ in range(500):  # until the waiters hold their places in the queue
            if generator.admitted == 1 + queue:
                break
            time.sleep(0.01)
        assert generator.admitted == 1 + queue
        status, headers, raw = post(port, "/v1/completions", {"prompt": "c"})
        assert status == 503 and headers["Retry-After"] == "1"
        assert json.loads(raw)["error"]["code"] == "busy" and "serve --queue N" in json.loads(raw)["error"]["message"]
        engine.asked.set()
        t.join(30)
        for w in waiters:
            w.join(30)
    assert [s for s, _, _ in first + waiting] == [200] * (1 + queue)


def test_a_shutdown_ends_a_stream_with_an_error_event() -> None:
    engine = Script([b"x"] * 50)
    with serving(engine) as (generator, port):
        results: list[tuple[int, dict[str, str], bytes]] = []
        engine.asked.clear()
        t = threading.Thread(target=lambda: results.append(post(port, "/v1/completions",
                                                                 {"prompt": "a", "max_tokens": 50, "stream": True})))
        t.start()
        assert engine.started.wait(10)
        generator.closing.set()
        engine.asked.set()
        t.join(30)
    got = events(results[0][2])
    assert results[0][0] == 200 and got[-1] == "[DONE]"
    assert got[-2] == {"error": {"message": "the server is shutting down", "type": "server_error", "param": None,
                                 "code": None}}


def get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_a_request_for_another_model_is_a_404_in_openais_shape() -> None:
    engine = Script([b"x"])
    with serving(engine) as (_, port):
        chat = {"messages": [{"role": "user", "content": "a"}], "model": "gpt-4"}
        for path, body in (("/v1/completions", {"prompt": "a", "model": "gpt-4"}), ("/v1/chat/completions", chat)):
            status, _, raw = post(port, path, body)
            error = json.loads(raw)["error"]
            assert status == 404, path
            assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", "model",
                                                                      "model_not_found")
            assert "'gpt-4' does not exist here: this server serves 'script'" in error["message"]
        assert post(port, "/v1/completions", {"prompt": "a", "model": "script"})[0] == 200
        assert post(port, "/v1/completions", {"prompt": "a"})[0] == 200  # not named: the one served


def test_one_model_is_retrieved_by_its_id() -> None:
    with serving(Script([b"x"])) as (generator, port):
        status, raw = get(port, "/v1/models/script")
        assert status == 200
        assert json.loads(raw) == {"id": "script", "object": "model", "created": generator.created,
                                   "owned_by": "script"}
        status, raw = get(port, "/v1/models/other")
        assert status == 404 and json.loads(raw)["error"]["code"] == "model_not_found"


def test_a_generation_stops_when_its_client_goes_away_streamed_or_not() -> None:
    class Slow(Script):  # 10 ms a token: the whole answer would hold the engine for 100 s
        def piece(self, token: int) -> bytes:
            time.sleep(0.01)
            return super().piece(token)

    engine = Slow([b"x"] * 10_000)
    with serving(engine) as (generator, port):
        for stream in (False, True):
            engine.asked.clear()
            engine.started.clear()
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            body = json.dumps({"prompt": "a", "max_tokens": 10_000, "stream": stream}).encode()
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            assert engine.started.wait(10)
            sock.close()  # the client gives up while the engine is held
            engine.asked.set()
            for _ in range(500):  # the engine is let go well before 10,000 tokens
                if generator.stats().busy == 0:
                    break
                time.sleep(0.01)
            assert generator.stats().busy == 0 and generator.stats().generated_tokens < 1000
            status, _, raw = post(port, "/v1/completions", {"prompt": "b", "max_tokens": 2})
            assert status == 200 and json.loads(raw)["choices"][0]["text"] == "xx"


def test_a_burst_of_fifty_streams_is_answered_never_reset() -> None:
    engine = Script([b"x"] * 3)
    results: list[int | str] = []
    lock = threading.Lock()

    def one() -> None:
        try:
            status, _, raw = post(port, "/v1/completions", {"prompt": "a", "stream": True})
            outcome: int | str = status if status == 503 or events(raw)[-1] == "[DONE]" else f"{status} unfinished"
        except OSError as e:  # a reset connection: the fault this test is for
            outcome = f"{type(e).__name__}: {e}"
        with lock:
            results.append(outcome)

    with serving(engine, queue=16) as (_, port):
        engine.asked.clear()  # the first holds the engine while the rest connect at once
        threads = [threading.Thread(target=one) for _ in range(50)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        engine.asked.set()
        for t in threads:
            t.join(60)
    assert len(results) == 50
    assert set(results) <= {200, 503}, [r for r in results if r not in (200, 503)]
    assert 200 in results


def test_the_listen_backlog_holds_a_burst() -> None:
    assert BACKLOG >= 128  # the stdlib's default of 5 reset connections of a burst (SYN cookies)
    server = make_server(Generator(Script([b"x"])), "127.0.0.1", 0)
    try:
        assert server.request_queue_size == BACKLOG
    finally:
        server.server_close()


def metrics(port: int) -> dict[str, float]:
    """``GET /metrics``, each sample by its name and labels (Prometheus' text format)."""
    status, raw = get(port, "/metrics")
    assert status == 200
    out: dict[str, float] = {}
    for line in raw.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_metrics_say_how_many_sequences_shared_each_decode_step() -> None:
    engine = BatchScript([b"a", b"b", b"c"], n_seq=4)
    with serving(engine) as (generator, port):
        assert metrics(port) == {"superfluid_sequences": 4, "superfluid_sequences_busy": 0,
                                 "superfluid_requests_waiting": 0, "superfluid_prompt_tokens_total": 0,
                                 "superfluid_prompt_tokens_cached_total": 0, "superfluid_generated_tokens_total": 0}
        engine.asked.clear()
        results: list[tuple[int, dict[str, str], bytes]] = []
        threads = [threading.Thread(target=lambda p=p: results.append(post(port, "/v1/completions",
                                                                          {"prompt": p, "max_tokens": 5})))
                   for p in ("a b", "cc dd ee", "f")]
        for t in threads:
            t.start()
        for _ in range(500):
            if generator.admitted == 3:
                break
            time.sleep(0.01)
        time.sleep(0.05)
        engine.asked.set()
        for t in threads:
            t.join(30)
        got = metrics(port)
    assert [s for s, _, _ in results] == [200] * 3
    assert got['superfluid_decode_steps_total{sequences="3"}'] >= 4  # the three generated together
    assert got["superfluid_generated_tokens_total"] == 15 and got["superfluid_prompt_tokens_total"] == 3 + 4 + 2
    assert got["superfluid_sequences_busy"] == 0 and got["superfluid_requests_waiting"] == 0


def test_metrics_of_an_engine_of_one_generation_at_a_time() -> None:
    with serving(Script([b"x"])) as (_, port):
        assert post(port, "/v1/completions", {"prompt": "a"})[0] == 200
        got = metrics(port)
        assert got["superfluid_sequences"] == 1 and got['superfluid_decode_steps_total{sequences="1"}'] == 2
        status, _, raw = post(port, "/metrics", {})
        assert status == 405 and json.loads(raw)["error"]["message"] == "/metrics takes GET"
