"""The llama.cpp worker's ``serve``: one GGUF model behind the shared OpenAI-compatible server."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from superfluid.runtime.kernel.errors import ModelLoadFailed, UsageError
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import parse_flag_pairs
from superfluid.runtime.llamacpp.check import gguf_fault, is_flag, read_pairs
from superfluid.runtime.llamacpp.drive import (
    ChatTemplateRefused,
    Context,
    DecodeFailed,
    Sampler,
    apply_chat_template,
    load_model,
)
from superfluid.runtime.llamacpp.loader import echoes_log, load
from superfluid.runtime.llamacpp.locate import locate
from superfluid.runtime.serving.completions import RequestRefused, Sampling
from superfluid.runtime.serving.flags import listen_flags, max_context_flag, queue_flag
from superfluid.runtime.serving.http import serve_engine

__all__ = ["LlamaServeLine", "LlamaEngine", "parse_serve", "serve", "MAX_CONTEXT"]

#: the context size when --max-context is not given (or the model's trained context, if smaller)
MAX_CONTEXT = 4096
_OWN = ("--host", "--port", "--max-context", "--queue")


@dataclass(kw_only=True, frozen=True, slots=True)
class LlamaServeLine:
    """What ``serve``'s command line asks for."""

    model: str
    host: str
    port: int
    max_context: int | None
    options: dict[str, Any]
    queue: int


def parse_serve(argv: Sequence[str]) -> LlamaServeLine:
    """The serve line: ``--host``, ``--port``, ``--max-context`` and ``--queue`` here, the rest as
    ``check`` reads them.

    Raises:
        UsageError: ``--model`` missing, an unknown flag, a flag without its value, a flag given
            twice, a port outside 0-65535, a ``--queue`` outside 0-4096, or an option value of the
            wrong shape.
    """
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
    return LlamaServeLine(model=model, host=host, port=port, max_context=max_context_flag(own), options=options,
                          queue=queue_flag(own))


class _Generation:
    """A fresh llama_context with the prompt decoded (in batches of ``batch-size``), and the sampler
    chain that draws from it (None: greedy)."""

    def __init__(self, engine: LlamaEngine, ctx: Any, sampler: Any = None) -> None:
        self.engine = engine
        self.ctx = ctx
        self.sampler = sampler

    def next_token(self) -> int:
        if self.sampler is not None:
            return int(self.sampler.sample(self.ctx))
        return int(self.ctx.argmax())

    def feed(self, token: int) -> None:
        self.engine.decode(self.ctx, [token])

    def full(self) -> bool:
        return bool(self.ctx.pos >= self.ctx.n_ctx)


class LlamaEngine:
    """The serving engine interface (``runtime.serving.generation.ServedEngine``) over one loaded llama.cpp model."""

    runtime_id = "llamacpp"

    def __init__(self, model: Any, model_id: str, model_path: str, n_ctx: int, options: Mapping[str, Any]) -> None:
        self.model = model
        self.model_id = model_id
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.options = dict(options)
        self.template: str | None = model.chat_template()

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return list(self.model.tokenize(text, parse_special=special))

    def chat_prompt(self, messages: Sequence[tuple[str, str]]) -> str:
        """The messages through ``llama_chat_apply_template`` with the model's own template.

        Raises:
            RequestRefused: 400 when the model has no template, or one llama.cpp does not know.
        """
        if self.template is None:
            raise RequestRefused(400, f"the model {self.model_id} carries no chat template (its GGUF has no "
                                      f"tokenizer.chat_template): send a prompt to /v1/completions", param="messages")
        try:
            return apply_chat_template(self.model.lib, self.template, list(messages))
        except ChatTemplateRefused as e:
            raise RequestRefused(400, f"the model {self.model_id}: {e}; send a prompt to /v1/completions",
                                 param="messages") from e

    @contextmanager
    def generation(self, prompt: list[int], sampling: Sampling | None = None) -> Iterator[_Generation]:
        with ExitStack() as stack:
            ctx = stack.enter_context(Context.create(self.model, n_ctx=self.n_ctx, options=self.options))
            step = max(1, min(int(self.options.get("batch-size", 2048)), ctx.n_ctx))
            for start in range(0, len(prompt), step):
                self.decode(ctx, prompt[start:start + step])
            sampler = None
            if sampling is not None:
                sampler = stack.enter_context(Sampler.create(
                    self.model.lib, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                    seed=sampling.seed or 0))
            yield _Generation(self, ctx, sampler)

    def decode(self, ctx: Any, tokens: list[int]) -> None:
        """Decode ``tokens`` in ``ctx``.

        Raises:
            RequestRefused: 500 with llama.cpp's status and last log line when it fails.
        """
        status = ctx.decode(tokens)
        if status != 0:
            raise RequestRefused(500, str(DecodeFailed(status, self.model.lib.log.last())), kind="server_error")

    def is_eos(self, token: int) -> bool:
        return bool(self.model.is_eog(token))

    def piece(self, token: int) -> bytes:
        return bytes(self.model.piece(token))

    def facts(self) -> dict[str, Any]:
        lib = self.model.lib
        return {"runtime": lib.version, "layout": lib.layout.name, "library": lib.path}

    def close(self) -> None:
        self.model.close()


def _load(line: LlamaServeLine, lookup: Lookup) -> LlamaEngine:
    """The library, the model and a first context (proving the options make one).

    Raises:
        LibraryNotFound, LibraryRefused: no libllama this adapter drives.
        ModelLoadFailed: the model is missing, not GGUF, or llama.cpp could not load it or make a
            context for it.
    """
    lib = load(locate(line.options.get("lib"), lookup).path, echo_log=echoes_log(lookup))
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


def serve(argv: Sequence[str], lookup: Lookup, out: TextIO) -> int:
    """``serve <argv...>``: load, then ``serving.http.serve_engine`` until SIGTERM/SIGINT; 0 on a clean close.

    Raises:
        UsageError: a bad command line (exit 2).
        ModelLoadFailed: the model did not load (exit 3).
        SuperfluidError: no usable libllama, the address cannot be bound, or serving failed (exit 1).
    """
    line = parse_serve(argv)
    engine = _load(line, lookup)
    return serve_engine(engine, line.host, line.port, out, echo_log=echoes_log(lookup),
                        queue=line.queue)
