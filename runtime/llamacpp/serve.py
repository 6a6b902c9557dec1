"""The worker's ``serve``: one GGUF model behind an OpenAI-compatible HTTP server (SPEC §7).

``serve --model PATH [--host H] [--port N] [--max-context N] [--lib P] [--<option> V]...``

The model is loaded through the loader and ``drive`` with the options applied to the model and
context parameters (checked against their declarations first: a bad one exits 2). Then a stdlib
``ThreadingHTTPServer`` answers:

- ``POST /v1/completions`` ``{"model", "prompt", "max_tokens", "temperature", "stop"}`` ->
  ``{"id", "object": "text_completion", "created", "model", "choices": [{"text", "index": 0,
  "finish_reason": "length"|"stop", "logprobs": null}], "usage": {"prompt_tokens",
  "completion_tokens", "total_tokens"}}``. Decoding is greedy only: ``temperature`` absent, null or 0;
  any other temperature, ``stream``, ``n``/``best_of`` other than 1, ``echo``, ``logprobs``,
  ``suffix``, ``logit_bias`` and non-zero penalties are refused with 400 rather than silently
  ignored. ``model`` is accepted whatever it names (the server has one model; the answer names it).
- ``GET /v1/models`` -> the one model; ``GET /health`` -> ``{"status": "ok"}``.

Requests are answered concurrently, but generation is serialized by a lock (one model, one
context at a time). Each completion runs in a fresh context of ``--max-context`` tokens (default
the model's trained context, at most 4096), so nothing of one request is seen by the next.
A bad request is a 4xx with an OpenAI-style error object, a failure a 500 — never a traceback.

When ready it prints one line of JSON on stdout, ``{"listening": "http://H:P", "model": <id>, ...}``
(``--port 0`` picks a free port, which the line names). SIGTERM or SIGINT shuts it down cleanly: no
new request is taken, a generation in flight stops at its next token with a 503, the model is freed,
exit 0.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from superfluid.runtime.errors import ModelLoadFailed, SuperfluidError, UsageError

__all__ = ["ServeLine", "CompletionRequest", "RequestRefused", "Engine", "parse_serve", "parse_completion",
           "make_server", "serve", "DEFAULT_HOST", "DEFAULT_PORT", "MAX_CONTEXT", "MAX_BODY"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
#: the context size when --max-context is not given (or the model's trained context, if smaller)
MAX_CONTEXT = 4096
#: the largest request body read, in bytes
MAX_BODY = 8 << 20
#: OpenAI's default for max_tokens
DEFAULT_MAX_TOKENS = 16
_OWN = ("--host", "--port", "--max-context")


@dataclass(frozen=True)
class ServeLine:
    """What ``serve``'s command line asks for."""

    model: str
    host: str
    port: int
    max_context: int | None
    options: dict[str, Any]


def _int_flag(flag: str, raw: str, lo: int, hi: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{flag} {raw!r}: expected an integer from {lo} to {hi}") from None
    if not lo <= value <= hi:
        raise UsageError(f"{flag} {raw!r}: expected an integer from {lo} to {hi}")
    return value


def parse_serve(argv: Sequence[str]) -> ServeLine:
    """The serve line: ``--host``, ``--port`` and ``--max-context`` here, the rest through ``check.parse_flags``.

    Raises:
        UsageError: ``--model`` missing, an unknown flag, a flag without its value, a flag given
            twice, a port outside 0-65535, or an option value of the wrong shape.
    """
    from superfluid.runtime.llamacpp.check import parse_flags
    from superfluid.runtime.llamacpp.options import OPTIONS
    from superfluid.runtime.options import find, parse_flag_pairs

    def known(name: str) -> bool:
        return f"--{name}" in _OWN or name in ("model", "lib", "llamacpp-lib") or find(OPTIONS, name) is not None

    own: dict[str, str] = {}
    rest: list[str] = []
    for name, value in parse_flag_pairs(argv, known):
        flag = f"--{name}"
        if flag not in _OWN:
            rest.append(f"{flag}={value}")  # the model and the options: check.parse_flags judges them
        elif flag in own:
            raise UsageError(f"{flag} is given twice")
        else:
            own[flag] = value
    model, options = parse_flags(rest)
    if not model:
        raise UsageError("serve needs --model PATH")
    host = own.get("--host", DEFAULT_HOST)
    if not host:
        raise UsageError("--host needs a value")
    port = _int_flag("--port", own["--port"], 0, 65535) if "--port" in own else DEFAULT_PORT
    max_context = _int_flag("--max-context", own["--max-context"], 1, 1 << 24) if "--max-context" in own else None
    return ServeLine(model=model, host=host, port=port, max_context=max_context, options=options)


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
    stop = data.get("stop")
    stops: list[str]
    if stop is None:
        stops = []
    elif isinstance(stop, str):
        stops = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop) and len(stop) <= 4:
        stops = list(stop)
    else:
        raise _refuse("'stop' must be a string or a list of at most 4 strings", "stop")
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
    return CompletionRequest(prompt=prompt, max_tokens=max_tokens, stop=tuple(s for s in stops if s))


class Engine:
    """One loaded model and the lock that serializes generation on it."""

    def __init__(self, model: Any, model_id: str, n_ctx: int, options: Mapping[str, Any]) -> None:
        self.model = model
        self.model_id = model_id
        self.n_ctx = n_ctx
        self.options = dict(options)
        self.created = int(time.time())
        self.lock = threading.Lock()
        self.closing = threading.Event()

    def complete(self, request: CompletionRequest) -> dict[str, Any]:
        """Generate greedily for ``request``; the OpenAI ``text_completion`` answer.

        Raises:
            RequestRefused: 400 when the prompt leaves no room in the context; 503 when the server
                shuts down; 500 when llama.cpp fails to decode.
        """
        with self.lock:
            if self.closing.is_set():
                raise RequestRefused(503, "the server is shutting down", kind="server_error")
            text, finish, n_prompt, n_out = self._generate(request)
        return {
            "id": f"cmpl-{secrets.token_hex(12)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_id,
            "choices": [{"text": text, "index": 0, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out},
        }

    def _generate(self, request: CompletionRequest) -> tuple[str, str, int, int]:
        from superfluid.runtime.llamacpp.drive import Context

        model = self.model
        prompt = model.tokenize(request.prompt)
        if not prompt:
            raise _refuse("the prompt is empty and the model adds no beginning-of-text token", "prompt")
        if len(prompt) >= self.n_ctx:
            raise _refuse(f"the prompt is {len(prompt)} tokens; the context holds {self.n_ctx} (serve "
                          f"--max-context N), leaving no room to generate", "prompt")
        with Context.create(model, n_ctx=self.n_ctx, options=self.options) as ctx:
            step = max(1, min(int(self.options.get("batch-size", 2048)), ctx.n_ctx))
            for start in range(0, len(prompt), step):
                self._decode(ctx, prompt[start:start + step])
            out: list[int] = []
            data = b""
            finish = "length"
            text = ""
            while len(out) < request.max_tokens:
                if self.closing.is_set():
                    raise RequestRefused(503, "the server is shutting down", kind="server_error")
                token = ctx.argmax()
                out.append(token)
                if model.is_eog(token):
                    finish = "stop"
                    break
                data += model.piece(token)
                text = data.decode("utf-8", "replace")
                cut = min((i for i in (text.find(s) for s in request.stop) if i >= 0), default=-1)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
                    break
                if len(out) == request.max_tokens or ctx.pos >= ctx.n_ctx:
                    break  # done, or the context is full: "length" either way
                self._decode(ctx, [token])
            return text, finish, len(prompt), len(out)

    def _decode(self, ctx: Any, tokens: list[int]) -> None:
        status = ctx.decode(tokens)
        if status != 0:
            from superfluid.runtime.llamacpp.drive import DecodeFailed

            raise RequestRefused(500, str(DecodeFailed(status, self.model.lib.log.last())), kind="server_error")

    def close(self) -> None:
        """Stop taking generations, wait for the one in flight, free the model."""
        self.closing.set()
        with self.lock:
            self.model.close()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "superfluid-worker-llamacpp"
    protocol_version = "HTTP/1.1"

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

    def _guard(self, answer: Any) -> None:
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
        engine = self.server.engine
        path = self._path()
        if path == "/health":
            self._json(200, {"status": "ok"})
        elif path == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": engine.model_id, "object": "model", "created": engine.created, "owned_by": "llamacpp"}]})
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
        self._json(200, self.server.engine.complete(request))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    engine: Engine
    echo_log: bool = False


class _Server6(_Server):
    address_family = socket.AF_INET6


def make_server(engine: Engine, host: str, port: int, *, echo_log: bool = False) -> _Server:
    """A server bound to ``host:port`` (0: a free port) answering for ``engine``; not yet serving.

    Raises:
        OSError: the address cannot be bound.
    """
    server = (_Server6 if ":" in host else _Server)((host, port), _Handler)
    server.engine = engine
    server.echo_log = echo_log
    return server


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _load(line: ServeLine, environ: Mapping[str, str]) -> Engine:
    """The library, the model and a first context (proving the options make one).

    Raises:
        LibraryNotFound, LibraryRefused: no libllama this adapter drives.
        ModelLoadFailed: the model is missing, not GGUF, or llama.cpp could not load it or make a
            context for it.
    """
    from superfluid.runtime.llamacpp.check import gguf_fault
    from superfluid.runtime.llamacpp.drive import Context, load_model
    from superfluid.runtime.llamacpp.loader import load
    from superfluid.runtime.llamacpp.locate import locate

    lib = load(locate(line.options.get("lib"), environ=environ).path, environ=dict(environ))
    if not os.path.isfile(line.model):
        raise ModelLoadFailed(f"{line.model} does not exist" if not os.path.exists(line.model)
                              else f"{line.model} is not a file")
    fault = gguf_fault(line.model)
    if fault:
        raise ModelLoadFailed(fault)
    model = load_model(lib, line.model, line.options)
    try:
        trained = int(model.facts()["trained_context"]) or MAX_CONTEXT
        n_ctx = line.max_context or min(MAX_CONTEXT, trained)
        with Context.create(model, n_ctx=n_ctx, options=line.options) as ctx:
            n_ctx = ctx.n_ctx
    except BaseException:
        model.close()
        raise
    stem = os.path.basename(line.model)
    model_id = stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    return Engine(model, model_id, n_ctx, line.options)


def serve(argv: Sequence[str], environ: Mapping[str, str], out: TextIO) -> int:
    """``serve <argv...>``: load, listen, announce on ``out``, serve until SIGTERM/SIGINT; 0 on a clean close.

    Raises:
        UsageError: a bad command line (exit 2).
        ModelLoadFailed: the model did not load (exit 3).
        SuperfluidError: no usable libllama, the address cannot be bound, or serving failed (exit 1).
    """
    line = parse_serve(argv)
    engine = _load(line, environ)
    try:
        server = make_server(engine, line.host, line.port, echo_log=environ.get("SUPERFLUID_LLAMA_LOG") == "1")
    except OSError as e:
        engine.close()
        raise SuperfluidError(f"cannot listen on {line.host}:{line.port}: {e.strerror or e}") from e
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
        host, port = server.server_address[:2]
        lib = engine.model.lib
        ready = {"listening": _url(str(host), int(port)), "model": engine.model_id,
                 "path": os.path.abspath(line.model), "runtime": lib.version, "layout": lib.layout.name,
                 "n_ctx": engine.n_ctx}
        try:
            out.write(json.dumps(ready) + "\n")
            out.flush()
        except (OSError, ValueError) as e:
            raise SuperfluidError(f"cannot announce the address on stdout: {e}") from e
        while not stop.wait(0.5):
            pass
    finally:
        engine.closing.set()
        server.shutdown()
        server.server_close()
        engine.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failure:
        raise SuperfluidError(f"serving failed: {type(failure[0]).__name__}: {failure[0]}")
    return 0
