"""The OpenAI-compatible HTTP layer every serving worker shares.

See docs/host-contract.md, "2. The API".
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import secrets
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, TextIO
from urllib.parse import unquote

from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.layout import worker_command
from superfluid.runtime.serving.completions import (
    DEFAULT_MAX_TOKENS,
    CompletionRequest,
    RequestRefused,
    Sampling,
    answer,
    chunk,
    parse_chat,
    parse_completion,
    usage_chunk,
)

__all__ = ["ServedEngine", "Generation", "Service", "Run", "CompletionRequest", "Sampling", "RequestRefused",
           "parse_completion", "parse_chat", "int_flag", "listen_flags", "max_context_flag", "queue_flag",
           "make_server", "serve_engine", "DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_QUEUE", "WAIT_SECONDS", "MAX_BODY",
           "DEFAULT_MAX_TOKENS"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
#: the largest request body read, in bytes
MAX_BODY = 8 << 20
#: requests that may wait for the engine besides the one generating (``--queue``)
DEFAULT_QUEUE = 16
#: seconds a request waits for the engine before it is answered 503
WAIT_SECONDS = 300.0
#: seconds a connection may stay silent (an idle keep-alive, a client that stopped reading a stream)
IO_TIMEOUT = 120.0
#: seconds a shutdown waits for the answers being written (the 503s of generations it stopped)
DRAIN_SECONDS = 10.0
#: connections the kernel holds before they are accepted (the stdlib's 5 reset a burst of clients)
BACKLOG = 1024


class Generation(Protocol):
    """One generation in progress: the engine's state after the prompt (and each token fed)."""

    def next_token(self) -> int:
        """The next token: the most likely one (greedy), or the one the engine draws when sampling."""

    def feed(self, token: int) -> None:
        """Append ``token`` to the context, so that ``next_token`` predicts the one after it.

        Raises:
            RequestRefused: 500 when the engine fails.
        """

    def full(self) -> bool:
        """True when the context has no room to feed another token."""


class ServedEngine(Protocol):
    """What the HTTP layer needs of a loaded model. An adapter's ``serve`` implements it."""

    #: the runtime id: the ``owned_by`` of ``/v1/models`` and the server's name
    runtime_id: str
    #: the model's name as ``/v1/models`` and every answer give it
    model_id: str
    #: the model file, as announced
    model_path: str
    #: tokens one generation may hold, prompt included
    n_ctx: int

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """The prompt's tokens as the engine feeds them (a beginning-of-text token included);
        ``special``: the text is a formatted chat, whose control tokens are read as such.

        Raises:
            RequestRefused: 400 when the engine refuses the text.
        """

    def chat_prompt(self, messages: Sequence[tuple[str, str]]) -> str:
        """The ``(role, content)`` messages formatted by the model's chat template, ending where
        the assistant's answer begins.

        Raises:
            RequestRefused: 400 when the model carries no chat template the engine can apply.
        """

    def generation(self, prompt: list[int], sampling: Sampling | None) -> AbstractContextManager[Generation]:
        """A fresh generation with ``prompt`` fed (nothing of an earlier one is seen), greedy when
        ``sampling`` is None, else drawing by it (its ``seed`` is always set here).

        Raises:
            RequestRefused: 400 when the engine cannot sample; 500 when it fails on the prompt.
        """

    def is_eos(self, token: int) -> bool:
        """True for an end-of-generation token (it ends the text and adds none)."""

    def piece(self, token: int) -> bytes:
        """The bytes of one token's text (UTF-8; a character may span tokens)."""

    def facts(self) -> dict[str, Any]:
        """What the ready line says of the engine besides the address, model and context
        (e.g. ``{"runtime": "<version>", "layout": "v2", "library": "<path>"}``)."""

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


def queue_flag(values: Mapping[str, str]) -> int:
    """``--queue N`` from ``values``: requests that may wait besides the one generating (0 to 4096;
    absent: ``DEFAULT_QUEUE``).

    Raises:
        UsageError: not an integer in that range.
    """
    return int_flag("--queue", values["--queue"], 0, 4096) if "--queue" in values else DEFAULT_QUEUE


def _shutting_down() -> RequestRefused:
    return RequestRefused(503, "the server is shutting down", kind="server_error")


def _busy(message: str) -> RequestRefused:
    return RequestRefused(503, message, kind="server_error", code="busy", headers={"Retry-After": "1"})


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many characters at the end of ``text`` may be the start of a stop string (not sent yet)."""
    longest = max((len(s) for s in stops), default=0)
    for k in range(min(len(text), longest - 1), 0, -1):
        tail = text[-k:]
        if any(s.startswith(tail) for s in stops):
            return k
    return 0


class Run:
    """One request's generation, holding the engine until ``close()``.

    ``pieces()`` yields the text as it is made; then ``finish`` (``"stop"`` or ``"length"``),
    ``n_prompt`` and ``n_out`` are final. Every generated token counts, the end-of-generation token
    and the one that completed a stop string included; the last one is never fed (nothing is asked
    after it).
    """

    def __init__(self, service: Service, request: CompletionRequest, stack: ExitStack,
                 gone: Callable[[], bool] | None = None) -> None:
        engine = service.engine
        self.service = service
        self.request = request
        self._stack = stack
        self._gone = gone
        self.id = f"{'chatcmpl' if request.chat else 'cmpl'}-{secrets.token_hex(12)}"
        self.created = int(time.time())
        text = engine.chat_prompt(request.messages) if request.messages is not None else request.prompt
        prompt = engine.tokenize(text, special=request.chat)
        if not prompt:
            raise RequestRefused(400, "the prompt is empty and the model adds no beginning-of-text token",
                                 param="prompt")
        if len(prompt) >= engine.n_ctx:
            raise RequestRefused(400, f"the prompt is {len(prompt)} tokens; the context holds {engine.n_ctx} (serve "
                                      f"--max-context N), leaving no room to generate",
                                 param="messages" if request.chat else "prompt")
        sampling = request.sampling
        if sampling is not None and sampling.seed is None:
            sampling = replace(sampling, seed=secrets.randbits(32))
        self._gen = stack.enter_context(engine.generation(prompt, sampling))
        self.n_prompt = len(prompt)
        self.n_out = 0
        self.finish = "length"

    def pieces(self) -> Iterator[str]:
        """The text, piece by piece: never a piece that may begin a stop string, nor half a character.

        Raises:
            RequestRefused: 503 when the server shuts down; 500 when the engine fails.
            ConnectionResetError: the client went away (``gone``): nobody waits for the rest.
        """
        engine, gen, request = self.service.engine, self._gen, self.request
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text, sent = "", 0
        while request.max_tokens is None or self.n_out < request.max_tokens:
            if self.service.closing.is_set():
                raise _shutting_down()
            if self._gone is not None and self._gone():
                raise ConnectionResetError("the client went away")
            token = gen.next_token()
            self.n_out += 1
            if engine.is_eos(token):
                self.finish = "stop"
                break
            text += decoder.decode(engine.piece(token))
            cut = min((i for i in (text.find(s, sent) for s in request.stop) if i >= 0), default=-1)
            if cut >= 0:
                self.finish = "stop"
                yield text[sent:cut]
                return
            safe = len(text) - _held_back(text, request.stop)
            if safe > sent:
                yield text[sent:safe]
                sent = safe
            if self.n_out == request.max_tokens or gen.full():
                break  # done, or the context is full: "length" either way
            gen.feed(token)
        text += decoder.decode(b"", final=True)
        if len(text) > sent:
            yield text[sent:]

    def answer(self) -> dict[str, Any]:
        """Generate to the end; the whole answer (``text_completion`` or ``chat.completion``)."""
        text = "".join(self.pieces())
        return answer(self.request, self.id, self.created, self.service.engine.model_id, text, self.finish,
                      self.n_prompt, self.n_out)

    def events(self) -> Iterator[dict[str, Any]]:
        """Generate to the end, chunk by chunk as streamed (a chat opens with the role)."""
        request, model = self.request, self.service.engine.model_id
        if request.chat:
            yield chunk(request, self.id, self.created, model, None, None)
        for text in self.pieces():
            if text:
                yield chunk(request, self.id, self.created, model, text, None)
        yield chunk(request, self.id, self.created, model, "", self.finish)
        if request.include_usage:
            yield usage_chunk(request, self.id, self.created, model, self.n_prompt, self.n_out)

    def close(self) -> None:
        """Let go of the engine (the generation, the lock, the place in the queue)."""
        self._stack.close()


class Service:
    """An engine behind the lock that serializes generation on it, the queue before that lock, and
    the flag that stops it."""

    def __init__(self, engine: ServedEngine, *, queue: int = DEFAULT_QUEUE, wait: float = WAIT_SECONDS) -> None:
        self.engine = engine
        self.created = int(time.time())
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.queue = queue
        self.wait = wait
        self._admitted = threading.BoundedSemaphore(queue + 1)
        self._answering = 0
        self._answered = threading.Condition()
        self._in = 0
        self._in_lock = threading.Lock()

    def _count(self, step: int) -> None:
        with self._in_lock:
            self._in += step

    @property
    def admitted(self) -> int:
        """Requests admitted now: the one generating and those waiting for the model."""
        return self._in

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Count a request as being answered for the block (``drain`` waits for the count to fall)."""
        with self._answered:
            self._answering += 1
        try:
            yield
        finally:
            with self._answered:
                self._answering -= 1
                self._answered.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every answer being written (a 503 after a shutdown
        included) to go out; False when some did not."""
        with self._answered:
            return self._answered.wait_for(lambda: self._answering == 0, timeout)

    def start(self, request: CompletionRequest, gone: Callable[[], bool] | None = None) -> Run:
        """Admit ``request``, wait for the engine and feed the prompt: the ``Run`` (the caller closes it).

        Raises:
            RequestRefused: 503 when the queue is full, the wait too long or the server shutting down;
                400 when the prompt leaves no room in the context or the engine refuses the request;
                500 when the engine fails.
        """
        stack = ExitStack()
        try:
            if self.closing.is_set():
                raise _shutting_down()
            if not self._admitted.acquire(blocking=False):
                raise _busy(f"the server is busy: one request is generating and {self.queue} wait for the model "
                            f"(serve --queue N); try again")
            stack.callback(self._admitted.release)
            self._count(+1)
            stack.callback(self._count, -1)
            if not self.lock.acquire(timeout=self.wait):
                raise _busy(f"the server is busy: the model was not free within {self.wait:g} s; try again")
            stack.callback(self.lock.release)
            if self.closing.is_set():
                raise _shutting_down()
            return Run(self, request, stack, gone)
        except BaseException:
            stack.close()
            raise

    def complete(self, request: CompletionRequest, gone: Callable[[], bool] | None = None) -> dict[str, Any]:
        """The whole answer to ``request`` (see ``start`` and ``Run.answer``); ``gone`` tells that
        its client went away, which stops the generation.

        Raises:
            RequestRefused: as ``start``, and 503/500 while generating.
            ConnectionResetError: ``gone`` said so.
        """
        run = self.start(request, gone)
        try:
            return run.answer()
        finally:
            run.close()

    def close(self) -> None:
        """Stop taking generations, wait for the one in flight, close the engine."""
        self.closing.set()
        with self.lock:
            self.engine.close()


#: POST endpoint -> the parser of its body
_POSTS: dict[str, Callable[[bytes], CompletionRequest]] = {
    "/v1/completions": parse_completion,
    "/v1/chat/completions": parse_chat,
}
_ENDPOINTS = "POST /v1/completions, POST /v1/chat/completions, GET /v1/models and GET /health"
_MODELS = "/v1/models"


def _peer_gone(conn: socket.socket) -> bool:
    """Whether the client closed its side of ``conn`` (readable, and nothing left to read); bytes
    waiting (a pipelined request) are not a close."""
    try:
        if not select.select([conn], [], [], 0)[0]:
            return False
        return conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # the status line and headers go out before the body, in two writes: with Nagle's algorithm a
    # keep-alive client's delayed ACK held every answer for ~40 ms
    disable_nagle_algorithm = True
    # a client that stops reading a stream cannot hold the model for ever
    timeout = IO_TIMEOUT

    def version_string(self) -> str:
        return worker_command(self.server.service.engine.runtime_id)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        if self.server.echo_log:
            super().log_message(format, *args)

    def _json(self, status: int, doc: Mapping[str, Any], *, close: bool = False,
              headers: Mapping[str, str] | None = None) -> None:
        body = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
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
            self._json(e.status, e.to_json(), close=e.status in (411, 413), headers=e.headers)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - a request never gets a traceback, only an error object
            self._json(500, RequestRefused(500, f"internal error: {type(e).__name__}: {e}",
                                           kind="server_error").to_json(), close=True)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._guard(self._get)

    def do_HEAD(self) -> None:  # noqa: N802
        self._guard(self._get)

    def do_POST(self) -> None:  # noqa: N802
        with self.server.service.answering():
            self._guard(self._post)

    def _method_not_allowed(self) -> None:
        self._json(405, RequestRefused(405, f"{self.command} is not allowed here").to_json(), close=True)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed  # noqa: N815

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def _get(self) -> None:
        path = self._path()
        if path == "/health":
            self._json(200, {"status": "ok"})
        elif path == _MODELS:
            self._json(200, {"object": "list", "data": [self._model()]})
        elif path.startswith(_MODELS + "/"):
            self._served(unquote(path[len(_MODELS) + 1:]))
            self._json(200, self._model())
        elif path in _POSTS:
            raise RequestRefused(405, f"{path} takes POST")
        else:
            raise RequestRefused(404, f"no such endpoint: {path} (this server answers {_ENDPOINTS})", code="not_found")

    def _model(self) -> dict[str, Any]:
        service = self.server.service
        return {"id": service.engine.model_id, "object": "model", "created": service.created,
                "owned_by": service.engine.runtime_id}

    def _served(self, model: str | None) -> None:
        """Refuse a request for a model this server does not serve (404, in OpenAI's shape)."""
        served = self.server.service.engine.model_id
        if model is not None and model != served:
            raise RequestRefused(404, f"the model {model!r} does not exist here: this server serves {served!r} "
                                      f"(GET {_MODELS})", param="model", code="model_not_found")

    def _post(self) -> None:
        path = self._path()
        parse = _POSTS.get(path)
        if parse is None:
            if path in ("/health", _MODELS) or path.startswith(_MODELS + "/"):
                raise RequestRefused(405, f"{path} takes GET")
            raise RequestRefused(404, f"no such endpoint: {path} (this server answers {_ENDPOINTS})", code="not_found")
        if self.headers.get("Transfer-Encoding"):
            raise RequestRefused(411, "send the body with a Content-Length (chunked bodies are not read)")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise RequestRefused(411, "a Content-Length is required")
        if int(length) > MAX_BODY:
            raise RequestRefused(413, f"the body is {length} bytes; at most {MAX_BODY} are read")
        request = parse(self.rfile.read(int(length)))
        self._served(request.model)
        service = self.server.service
        if not request.stream:
            self._json(200, service.complete(request, lambda: _peer_gone(self.connection)))
            return
        run = service.start(request)  # a refusal here is still an ordinary JSON answer
        try:
            self._stream(run)
        finally:
            run.close()

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def _event(self, doc: Mapping[str, Any]) -> None:
        self._send_chunk(b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n")

    def _stream(self, run: Run) -> None:
        """Server-sent events in a chunked response: the chunks, then ``[DONE]``; a failure once the
        stream has begun is an error event (the status line is already sent)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in run.events():
                self._event(event)
        except RequestRefused as e:
            self._event(e.to_json())
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            raise
        except Exception as e:  # noqa: BLE001 - a stream never gets a traceback, only an error event
            self._event(RequestRefused(500, f"internal error: {type(e).__name__}: {e}", kind="server_error").to_json())
            self.close_connection = True
        self._send_chunk(b"data: [DONE]\n\n")
        self._send_chunk(b"")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = BACKLOG
    service: Service
    echo_log: bool = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a reset, a broken pipe: common as a server stops under a
        keep-alive client) is not a fault of ours; anything else is one line, never a traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        sys.stderr.write(f"serving: a request from {client_address[0]} failed: {error!r}\n")


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


def serve_engine(engine: ServedEngine, host: str, port: int, out: TextIO, *, echo_log: bool = False,
                 queue: int = DEFAULT_QUEUE) -> int:
    """Listen on ``host:port``, announce on ``out``, serve until SIGTERM/SIGINT; 0 on a clean close.

    ``queue`` requests may wait for the engine besides the one generating. The engine is closed on
    every way out, including a failure to bind.

    Raises:
        SuperfluidError: the address cannot be bound, the ready line cannot be written, or serving
            failed (exit 1).
    """
    service = Service(engine, queue=queue)
    try:
        server = make_server(service, host, port, echo_log=echo_log)
    except OSError as e:
        service.close()
        fix = "give another --port, or --port 0 for a free one" if e.errno == errno.EADDRINUSE else None
        raise SuperfluidError(f"cannot listen on {host}:{port}: {e.strerror or e}", fix=fix) from e
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
        service.drain(DRAIN_SECONDS)
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failure:
        raise SuperfluidError(f"serving failed: {type(failure[0]).__name__}: {failure[0]}")
    return 0
