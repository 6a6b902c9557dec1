"""The OpenAI-compatible HTTP layer every serving worker shares (SPEC §7).

A worker's ``serve`` loads its model into an ``Engine`` (the small interface below: tokenize, a
greedy generation step by step, a token's bytes, end-of-generation, the model's name and context
size) and hands it to ``serve_engine``. Everything else is here, written once:

- ``POST /v1/completions`` ``{"model", "prompt", "max_tokens", "temperature", "stop"}`` ->
  ``{"id", "object": "text_completion", "created", "model", "choices": [{"text", "index": 0,
  "finish_reason": "length"|"stop", "logprobs": null}], "usage": {"prompt_tokens",
  "completion_tokens", "total_tokens"}}``. Decoding is greedy only: ``temperature`` absent, null or 0;
  any other temperature, ``stream``, ``n``/``best_of`` other than 1, ``echo``, ``logprobs``,
  ``suffix``, ``logit_bias`` and non-zero penalties are refused with 400 rather than silently
  ignored. ``model`` is accepted whatever it names (the server has one model; the answer names it).
- ``GET /v1/models`` -> the one model; ``GET /health`` -> ``{"status": "ok"}``.
- A bad request is a 4xx with an OpenAI-style error object, a failure a 500, never a traceback.
- Requests are answered concurrently; generation is serialized by a lock (one model at a time).
- When ready, one line of JSON on stdout: ``{"listening": "http://H:P", "model", "path", <the
  engine's facts>, "n_ctx"}`` (``--port 0`` picks a free port, which the line names).
- SIGTERM or SIGINT shuts it down cleanly: no new request is taken, a generation in flight stops
  at its next token with a 503, the engine is closed, ``serve_engine`` returns 0.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, TextIO

from superfluid.runtime.errors import SuperfluidError, UsageError

__all__ = ["Engine", "Generation", "Service", "CompletionRequest", "RequestRefused", "parse_completion",
           "int_flag", "listen_flags", "max_context_flag", "make_server", "serve_engine", "DEFAULT_HOST",
           "DEFAULT_PORT", "MAX_BODY", "DEFAULT_MAX_TOKENS"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
#: the largest request body read, in bytes
MAX_BODY = 8 << 20
#: OpenAI's default for max_tokens
DEFAULT_MAX_TOKENS = 16


class Generation(Protocol):
    """One greedy generation in progress: the engine's state after the prompt (and each token fed)."""

    def next_token(self) -> int:
        """The most likely next token (greedy)."""

    def feed(self, token: int) -> None:
        """Append ``token`` to the context, so that ``next_token`` predicts the one after it.

        Raises:
            RequestRefused: 500 when the engine fails.
        """

    def full(self) -> bool:
        """True when the context has no room to feed another token."""


class Engine(Protocol):
    """What the HTTP layer needs of a loaded model. An adapter's ``serve`` implements it."""

    #: the runtime id: the ``owned_by`` of ``/v1/models`` and the server's name
    runtime_id: str
    #: the model's name as ``/v1/models`` and every answer give it
    model_id: str
    #: the model file, as announced
    model_path: str
    #: tokens one generation may hold, prompt included
    n_ctx: int

    def tokenize(self, text: str) -> list[int]:
        """The prompt's tokens as the engine feeds them (a beginning-of-text token included).

        Raises:
            RequestRefused: 400 when the engine refuses the text.
        """

    def generation(self, prompt: list[int]) -> AbstractContextManager[Generation]:
        """A fresh generation with ``prompt`` fed (nothing of an earlier one is seen).

        Raises:
            RequestRefused: 500 when the engine fails on the prompt.
        """

    def is_eos(self, token: int) -> bool:
        """True for an end-of-generation token (it ends the text and adds none)."""

    def piece(self, token: int) -> bytes:
        """The bytes of one token's text (UTF-8; a character may span tokens)."""

    def facts(self) -> dict[str, Any]:
        """What the ready line says of the engine besides the address, model and context
        (e.g. ``{"runtime": "<version>", "layout": "v2"}``)."""

    def close(self) -> None:
        """Free the model (called once, with no generation running)."""


def int_flag(flag: str, raw: str, lo: int, hi: int) -> int:
    """``raw`` as an integer from ``lo`` to ``hi``.

    Raises:
        UsageError: not an integer, or out of range (``--port '65536': expected an integer from 0 to 65535``).
    """
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{flag} {raw!r}: expected an integer from {lo} to {hi}") from None
    if not lo <= value <= hi:
        raise UsageError(f"{flag} {raw!r}: expected an integer from {lo} to {hi}")
    return value


def listen_flags(values: Mapping[str, str]) -> tuple[str, int]:
    """``(host, port)`` from ``{"--host": H, "--port": N}`` (either absent: the defaults).

    Raises:
        UsageError: an empty host, or a port outside 0-65535.
    """
    host = values.get("--host", DEFAULT_HOST)
    if not host:
        raise UsageError("--host needs a value")
    port = int_flag("--port", values["--port"], 0, 65535) if "--port" in values else DEFAULT_PORT
    return host, port


def max_context_flag(values: Mapping[str, str]) -> int | None:
    """``--max-context N`` from ``values`` (1 to 2**24 tokens), or None when it is absent.

    Raises:
        UsageError: not an integer in that range.
    """
    return int_flag("--max-context", values["--max-context"], 1, 1 << 24) if "--max-context" in values else None


class RequestRefused(Exception):
    """A request the server answers with an error object (status, message, OpenAI error type)."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code

    def to_json(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class CompletionRequest:
    """A checked ``/v1/completions`` request."""

    prompt: str
    max_tokens: int
    stop: tuple[str, ...]


def _refuse(message: str, param: str | None = None) -> RequestRefused:
    return RequestRefused(400, message, param=param)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _stops(stop: Any) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop) and len(stop) <= 4:
        return list(stop)
    raise _refuse("'stop' must be a string or a list of at most 4 strings", "stop")


def _refuse_unsupported(data: Mapping[str, Any]) -> None:
    """400 for what this server does not do, rather than ignoring it."""
    if data.get("stream"):
        raise _refuse("'stream': this server does not stream; leave it out or send false", "stream")
    for key in ("n", "best_of"):
        if data.get(key) not in (None, 1):
            raise _refuse(f"{key!r} {json.dumps(data[key])}: this server returns one choice; send 1 or leave it out",
                          key)
    if data.get("echo"):
        raise _refuse("'echo': this server does not echo the prompt; leave it out or send false", "echo")
    for key in ("logprobs", "suffix"):
        if data.get(key) is not None:
            raise _refuse(f"{key!r}: this server does not support it; leave it out", key)
    if data.get("logit_bias"):
        raise _refuse("'logit_bias': this server does not support it; leave it out", "logit_bias")
    for key in ("presence_penalty", "frequency_penalty"):
        value = data.get(key)
        if value is not None and (not _number(value) or value != 0):
            raise _refuse(f"{key!r} {json.dumps(value)}: this server decodes greedily without penalties; send 0 "
                          f"or leave it out", key)


def parse_completion(body: bytes) -> CompletionRequest:
    """Check a ``/v1/completions`` body.

    Raises:
        RequestRefused: 400 for a body that is not a JSON object, a field of the wrong type, or a
            request for something this server does not do (sampling, streaming, several choices...).
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise _refuse(f"the body is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise _refuse(f"the body must be a JSON object (it is a {type(data).__name__})")
    if "model" in data and data["model"] is not None and not isinstance(data["model"], str):
        raise _refuse("'model' must be a string", "model")
    prompt = data.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise _refuse("'prompt' must be a string (or a list of one string)", "prompt")
    max_tokens = data.get("max_tokens")
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _refuse(f"'max_tokens' must be an integer of at least 1 (it is {json.dumps(max_tokens)})", "max_tokens")
    temperature = data.get("temperature")
    if temperature is not None and (not _number(temperature) or temperature != 0):
        raise _refuse(f"'temperature' {json.dumps(temperature)}: this server decodes greedily only; send 0 or "
                      f"leave it out", "temperature")
    stops = _stops(data.get("stop"))
    _refuse_unsupported(data)
    return CompletionRequest(prompt=prompt, max_tokens=max_tokens, stop=tuple(s for s in stops if s))


def _shutting_down() -> RequestRefused:
    return RequestRefused(503, "the server is shutting down", kind="server_error")


class Service:
    """An engine behind the lock that serializes generation on it, and the flag that stops it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.created = int(time.time())
        self.lock = threading.Lock()
        self.closing = threading.Event()

    def complete(self, request: CompletionRequest) -> dict[str, Any]:
        """Generate greedily for ``request``; the OpenAI ``text_completion`` answer.

        Raises:
            RequestRefused: 400 when the prompt leaves no room in the context; 503 when the server
                shuts down; 500 when the engine fails.
        """
        with self.lock:
            if self.closing.is_set():
                raise _shutting_down()
            text, finish, n_prompt, n_out = self._generate(request)
        return {
            "id": f"cmpl-{secrets.token_hex(12)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.engine.model_id,
            "choices": [{"text": text, "index": 0, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out},
        }

    def _generate(self, request: CompletionRequest) -> tuple[str, str, int, int]:
        """``(text, finish_reason, prompt tokens, completion tokens)``.

        Every generated token counts, the end-of-generation token and the one that completed a
        stop string included; the last one is never fed (nothing is asked after it).
        """
        engine = self.engine
        prompt = engine.tokenize(request.prompt)
        if not prompt:
            raise _refuse("the prompt is empty and the model adds no beginning-of-text token", "prompt")
        if len(prompt) >= engine.n_ctx:
            raise _refuse(f"the prompt is {len(prompt)} tokens; the context holds {engine.n_ctx} (serve "
                          f"--max-context N), leaving no room to generate", "prompt")
        with engine.generation(prompt) as gen:
            out: list[int] = []
            data = b""
            finish = "length"
            text = ""
            while len(out) < request.max_tokens:
                if self.closing.is_set():
                    raise _shutting_down()
                token = gen.next_token()
                out.append(token)
                if engine.is_eos(token):
                    finish = "stop"
                    break
                data += engine.piece(token)
                text = data.decode("utf-8", "replace")
                cut = min((i for i in (text.find(s) for s in request.stop) if i >= 0), default=-1)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
                    break
                if len(out) == request.max_tokens or gen.full():
                    break  # done, or the context is full: "length" either way
                gen.feed(token)
            return text, finish, len(prompt), len(out)

    def close(self) -> None:
        """Stop taking generations, wait for the one in flight, close the engine."""
        self.closing.set()
        with self.lock:
            self.engine.close()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # the status line and headers go out before the body, in two writes: with Nagle's algorithm a
    # keep-alive client's delayed ACK held every answer for ~40 ms
    disable_nagle_algorithm = True

    def version_string(self) -> str:
        return f"superfluid-worker-{self.server.service.engine.runtime_id}"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        if self.server.echo_log:
            super().log_message(format, *args)

    def _json(self, status: int, doc: Mapping[str, Any], *, close: bool = False) -> None:
        body = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors the stdlib raises itself (a malformed request line, a method nobody handles), as JSON."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        refused = RequestRefused(code, message or phrase)
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # an unparsable line: answer with a status line all the same
        self._json(code, refused.to_json(), close=True)

    def _guard(self, answer: Callable[[], None]) -> None:
        try:
            answer()
        except RequestRefused as e:
            self._json(e.status, e.to_json(), close=e.status in (411, 413))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - a request never gets a traceback, only an error object
            self._json(500, RequestRefused(500, f"internal error: {type(e).__name__}: {e}",
                                           kind="server_error").to_json(), close=True)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._guard(self._get)

    def do_HEAD(self) -> None:  # noqa: N802
        self._guard(self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._guard(self._post)

    def _method_not_allowed(self) -> None:
        self._json(405, RequestRefused(405, f"{self.command} is not allowed here").to_json(), close=True)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed  # noqa: N815

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def _get(self) -> None:
        service = self.server.service
        path = self._path()
        if path == "/health":
            self._json(200, {"status": "ok"})
        elif path == "/v1/models":
            engine = service.engine
            self._json(200, {"object": "list", "data": [
                {"id": engine.model_id, "object": "model", "created": service.created,
                 "owned_by": engine.runtime_id}]})
        elif path == "/v1/completions":
            raise RequestRefused(405, "/v1/completions takes POST")
        else:
            raise RequestRefused(404, f"no such endpoint: {path} (this server answers POST /v1/completions, "
                                      f"GET /v1/models and GET /health)", code="not_found")

    def _post(self) -> None:
        path = self._path()
        if path != "/v1/completions":
            if path in ("/health", "/v1/models"):
                raise RequestRefused(405, f"{path} takes GET")
            raise RequestRefused(404, f"no such endpoint: {path} (this server answers POST /v1/completions)",
                                 code="not_found")
        if self.headers.get("Transfer-Encoding"):
            raise RequestRefused(411, "send the body with a Content-Length (chunked bodies are not read)")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise RequestRefused(411, "a Content-Length is required")
        if int(length) > MAX_BODY:
            raise RequestRefused(413, f"the body is {length} bytes; at most {MAX_BODY} are read")
        request = parse_completion(self.rfile.read(int(length)))
        self._json(200, self.server.service.complete(request))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    service: Service
    echo_log: bool = False


class _Server6(_Server):
    address_family = socket.AF_INET6


def make_server(service: Service, host: str, port: int, *, echo_log: bool = False) -> _Server:
    """A server bound to ``host:port`` (0: a free port) answering for ``service``; not yet serving.

    Raises:
        OSError: the address cannot be bound.
    """
    server = (_Server6 if ":" in host else _Server)((host, port), _Handler)
    server.service = service
    server.echo_log = echo_log
    return server


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve_engine(engine: Engine, host: str, port: int, out: TextIO, *, echo_log: bool = False) -> int:
    """Listen on ``host:port``, announce on ``out``, serve until SIGTERM/SIGINT; 0 on a clean close.

    The engine is closed on every way out, including a failure to bind.

    Raises:
        SuperfluidError: the address cannot be bound, the ready line cannot be written, or serving
            failed (exit 1).
    """
    service = Service(engine)
    try:
        server = make_server(service, host, port, echo_log=echo_log)
    except OSError as e:
        service.close()
        raise SuperfluidError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.serve_forever(poll_interval=0.2)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failure.append(e)
            stop.set()

    thread = threading.Thread(target=run, name="serve", daemon=True)
    thread.start()
    try:
        bound_host, bound_port = server.server_address[:2]
        ready = {"listening": _url(str(bound_host), int(bound_port)), "model": engine.model_id,
                 "path": os.path.abspath(engine.model_path), **engine.facts(), "n_ctx": engine.n_ctx}
        try:
            out.write(json.dumps(ready) + "\n")
            out.flush()
        except (OSError, ValueError) as e:
            raise SuperfluidError(f"cannot announce the address on stdout: {e}") from e
        while not stop.wait(0.5):
            pass
    finally:
        service.closing.set()
        server.shutdown()
        server.server_close()
        service.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failure:
        raise SuperfluidError(f"serving failed: {type(failure[0]).__name__}: {failure[0]}")
    return 0
