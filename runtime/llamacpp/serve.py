"""The worker's ``serve``: one GGUF model behind the shared OpenAI-compatible server (SPEC §7).

``serve --model PATH [--host H] [--port N] [--max-context N] [--lib P] [--<option> V]...``

The model is loaded through the loader and ``drive`` with the options applied to the model and
context parameters (checked against their declarations first: a bad one exits 2). The HTTP layer,
the ready line and the signal handling are ``superfluid.runtime.serving``'s; this module is the
llama.cpp part: the command line and ``LlamaEngine``, the engine interface over a loaded model.

Each completion runs in a fresh context of ``--max-context`` tokens (default the model's trained
context, at most 4096), so nothing of one request is seen by the next. The ready line names the
library's build (``runtime``) and its struct layout (``layout``) besides the address.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from superfluid.runtime.errors import ModelLoadFailed, UsageError
from superfluid.runtime.serving import RequestRefused, listen_flags, max_context_flag, serve_engine

__all__ = ["ServeLine", "LlamaEngine", "parse_serve", "serve", "MAX_CONTEXT"]

#: the context size when --max-context is not given (or the model's trained context, if smaller)
MAX_CONTEXT = 4096
_OWN = ("--host", "--port", "--max-context")


@dataclass(frozen=True)
class ServeLine:
    """What ``serve``'s command line asks for."""

    model: str
    host: str
    port: int
    max_context: int | None
    options: dict[str, Any]


def parse_serve(argv: Sequence[str]) -> ServeLine:
    """The serve line: ``--host``, ``--port`` and ``--max-context`` here, the rest as ``check`` reads them.

    Raises:
        UsageError: ``--model`` missing, an unknown flag, a flag without its value, a flag given
            twice, a port outside 0-65535, or an option value of the wrong shape.
    """
    from superfluid.runtime.llamacpp.check import is_flag, read_pairs
    from superfluid.runtime.options import parse_flag_pairs

    own: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for name, value in parse_flag_pairs(argv, lambda n: f"--{n}" in _OWN or is_flag(n)):
        flag = f"--{name}"
        if flag not in _OWN:
            rest.append((name, value))  # the model and the options: check.read_pairs judges them
        elif flag in own:
            raise UsageError(f"{flag} is given twice")
        else:
            own[flag] = value
    model, options = read_pairs(rest)
    if not model:
        raise UsageError("serve needs --model PATH")
    host, port = listen_flags(own)
    return ServeLine(model=model, host=host, port=port, max_context=max_context_flag(own), options=options)


class _Generation:
    """A fresh llama_context with the prompt decoded (in batches of ``batch-size``)."""

    def __init__(self, engine: LlamaEngine, ctx: Any) -> None:
        self.engine = engine
        self.ctx = ctx

    def next_token(self) -> int:
        return int(self.ctx.argmax())

    def feed(self, token: int) -> None:
        self.engine.decode(self.ctx, [token])

    def full(self) -> bool:
        return bool(self.ctx.pos >= self.ctx.n_ctx)


class LlamaEngine:
    """The serving engine interface (``runtime.serving.Engine``) over one loaded llama.cpp model."""

    runtime_id = "llamacpp"

    def __init__(self, model: Any, model_id: str, model_path: str, n_ctx: int, options: Mapping[str, Any]) -> None:
        self.model = model
        self.model_id = model_id
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.options = dict(options)

    def tokenize(self, text: str) -> list[int]:
        return list(self.model.tokenize(text))

    @contextmanager
    def generation(self, prompt: list[int]) -> Iterator[_Generation]:
        from superfluid.runtime.llamacpp.drive import Context

        with Context.create(self.model, n_ctx=self.n_ctx, options=self.options) as ctx:
            step = max(1, min(int(self.options.get("batch-size", 2048)), ctx.n_ctx))
            for start in range(0, len(prompt), step):
                self.decode(ctx, prompt[start:start + step])
            yield _Generation(self, ctx)

    def decode(self, ctx: Any, tokens: list[int]) -> None:
        """Decode ``tokens`` in ``ctx``.

        Raises:
            RequestRefused: 500 with llama.cpp's status and last log line when it fails.
        """
        status = ctx.decode(tokens)
        if status != 0:
            from superfluid.runtime.llamacpp.drive import DecodeFailed

            raise RequestRefused(500, str(DecodeFailed(status, self.model.lib.log.last())), kind="server_error")

    def is_eos(self, token: int) -> bool:
        return bool(self.model.is_eog(token))

    def piece(self, token: int) -> bytes:
        return bytes(self.model.piece(token))

    def facts(self) -> dict[str, Any]:
        lib = self.model.lib
        return {"runtime": lib.version, "layout": lib.layout.name}

    def close(self) -> None:
        self.model.close()


def _load(line: ServeLine, environ: Mapping[str, str]) -> LlamaEngine:
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
    return LlamaEngine(model, model_id, line.model, n_ctx, line.options)


def serve(argv: Sequence[str], environ: Mapping[str, str], out: TextIO) -> int:
    """``serve <argv...>``: load, then ``serving.serve_engine`` until SIGTERM/SIGINT; 0 on a clean close.

    Raises:
        UsageError: a bad command line (exit 2).
        ModelLoadFailed: the model did not load (exit 3).
        SuperfluidError: no usable libllama, the address cannot be bound, or serving failed (exit 1).
    """
    line = parse_serve(argv)
    engine = _load(line, environ)
    return serve_engine(engine, line.host, line.port, out, echo_log=environ.get("SUPERFLUID_LLAMA_LOG") == "1")
