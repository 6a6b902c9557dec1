"""The llama.cpp worker's ``serve``: one GGUF model behind the shared OpenAI-compatible server."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from superfluid.runtime.kernel.errors import ModelLoadFailed, UsageError
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import parse_flag_pairs
from superfluid.runtime.llamacpp.batching import Sequences
from superfluid.runtime.llamacpp.drive import ChatTemplateRefused, Context, apply_chat_template, load_model
from superfluid.runtime.llamacpp.line import gguf_fault, is_flag, library, read_pairs
from superfluid.runtime.llamacpp.loader import echoes_log
from superfluid.runtime.llamacpp.options import PARALLEL, UINT32_MAX
from superfluid.runtime.serving.completions import RequestRefused, Sampling
from superfluid.runtime.serving.engine import Feed
from superfluid.runtime.serving.flags import listen_flags, max_context_flag, queue_flag
from superfluid.runtime.serving.http import serve_engine

__all__ = ["LlamaServeLine", "LlamaEngine", "parse_serve", "serve", "MAX_CONTEXT", "BATCH"]

#: the context of a sequence when --max-context is not given (or the model's trained context, if smaller)
MAX_CONTEXT = 4096
#: llama_context_params' n_batch default: the tokens one step decodes (``batch-size``)
BATCH = 2048
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
            twice, a port outside 0-65535, a ``--queue`` outside 0-4096, an option value of the
            wrong shape, or a context of more tokens than llama.cpp counts (``--max-context`` times
            ``parallel``).
    """
    own: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for name, value in parse_flag_pairs(argv, lambda n: f"--{n}" in _OWN or is_flag(n)):
        flag = f"--{name}"
        if flag not in _OWN:
            rest.append((name, value))  # the model and the options: line.read_pairs judges them
        elif flag in own:
            raise UsageError(f"{flag} is given twice")
        else:
            own[flag] = value
    model, options = read_pairs(rest)
    if not model:
        raise UsageError("serve needs --model PATH")
    host, port = listen_flags(own)
    max_context = max_context_flag(own)
    parallel = int(options.get("parallel", PARALLEL))
    if max_context is not None and max_context * parallel > UINT32_MAX:
        raise UsageError(f"--max-context {max_context} for each of {parallel} sequences is more than a llama.cpp "
                         f"context holds ({UINT32_MAX} tokens): give a smaller --max-context or "
                         f"--llamacpp-parallel")
    return LlamaServeLine(model=model, host=host, port=port, max_context=max_context, options=options,
                          queue=queue_flag(own))


class LlamaEngine:
    """The serving engine interface (``runtime.serving.engine.ServedEngine``) over one loaded llama.cpp
    model, decoding its requests together (``Batched``) in the sequences of one context made once."""

    runtime_id = "llamacpp"

    def __init__(self, model: Any, model_id: str, model_path: str, ctx: Context) -> None:
        self.model = model
        self.model_id = model_id
        self.model_path = model_path
        self.ctx = ctx
        self.sequences = Sequences(ctx)
        self.n_ctx = self.sequences.n_ctx
        self.n_seq = self.sequences.n_seq
        self.n_batch = self.sequences.n_batch
        self.template: str | None = model.chat_template()
        self._pieces: dict[int, bytes] = {}
        self._ends: dict[int, bool] = {}

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

    def pick(self, prompt: Sequence[int], free: Sequence[int]) -> int:
        return self.sequences.pick(prompt, free)

    def begin(self, seq: int, prompt: Sequence[int], sampling: Sampling | None) -> int:
        return self.sequences.begin(seq, prompt, sampling)

    def step(self, feeds: Sequence[Feed]) -> list[int]:
        return self.sequences.step(feeds)

    def full(self, seq: int) -> bool:
        return self.sequences.full(seq)

    def end(self, seq: int, *, keep: bool = True) -> None:
        self.sequences.end(seq, keep=keep)

    def is_eos(self, token: int) -> bool:
        end = self._ends.get(token)
        if end is None:
            end = self._ends[token] = bool(self.model.is_eog(token))
        return end

    def piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = bytes(self.model.piece(token))
        return piece

    def facts(self) -> dict[str, Any]:
        lib = self.model.lib
        return {"runtime": lib.version, "layout": lib.layout.name, "library": lib.path}

    def close(self) -> None:
        self.sequences.close()
        self.ctx.close()
        self.model.close()


def _load(line: LlamaServeLine, lookup: Lookup) -> LlamaEngine:
    """The library, the model and the one context that serves it: ``parallel`` sequences of
    ``--max-context`` tokens each (the model's trained context, at most ``MAX_CONTEXT``, when not
    given), so the KV cache holds ``parallel`` times that; a batch holds at least one token of
    every sequence.

    Raises:
        LibraryNotFound, LibraryRefused: no libllama this adapter drives.
        ModelLoadFailed: the model is missing, not GGUF, or llama.cpp could not load it or make a
            context for it.
    """
    lib = library(line.options, lookup)
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
        n_seq = int(line.options.get("parallel", PARALLEL))
        n_batch = max(int(line.options.get("batch-size", BATCH)), n_seq)
        ctx = Context.create(model, n_ctx=n_ctx * n_seq, options=line.options,
                             fields={"n_seq_max": n_seq, "n_batch": n_batch, "kv_unified": False})
    except BaseException:
        model.close()
        raise
    stem = os.path.basename(line.model)
    model_id = stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    try:
        return LlamaEngine(model, model_id, line.model, ctx)
    except BaseException:
        ctx.close()
        model.close()
        raise


def serve(argv: Sequence[str], lookup: Lookup, out: TextIO, gate: Callable[[], bool] | None = None) -> int:
    """``serve <argv...>``: load, then ``serving.http.serve_engine`` until SIGTERM/SIGINT; 0 on a clean close
    (and when ``gate``, asked once the engine is loaded, says no).

    Raises:
        UsageError: a bad command line (exit 2).
        ModelLoadFailed: the model did not load (exit 3).
        SuperfluidError: no usable libllama, the address cannot be bound, or serving failed (exit 1).
    """
    line = parse_serve(argv)
    engine = _load(line, lookup)
    return serve_engine(engine, line.host, line.port, out, echo_log=echoes_log(lookup),
                        queue=line.queue, gate=gate)
