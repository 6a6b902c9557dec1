"""The basert worker's ``serve``: one baseRT model behind the shared OpenAI-compatible server.

See docs/runtimes.md, "basert (baseRT)".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from superfluid.runtime.basert.check import KV_BITS_FLAGS, kv_bits_flag, lib_flag
from superfluid.runtime.basert.loader import open_library
from superfluid.runtime.basert.locate import FLAG
from superfluid.runtime.basert.model import Model, looks_like_model
from superfluid.runtime.kernel.errors import ModelLoadFailed, SuperfluidError, UsageError
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import flag_values
from superfluid.runtime.serving.completions import RequestRefused, Sampling
from superfluid.runtime.serving.flags import listen_flags, max_context_flag, queue_flag
from superfluid.runtime.serving.http import serve_engine

__all__ = ["BasertServeLine", "BasertEngine", "parse_serve", "serve", "MAX_CONTEXT"]

RUNTIME_ID = "basert"
#: the context when the engine reports no max_seq_len
MAX_CONTEXT = 4096
_TAKES = ("--model", "--host", "--port", "--max-context", "--queue", FLAG, "--lib", *KV_BITS_FLAGS)


@dataclass(kw_only=True, frozen=True, slots=True)
class BasertServeLine:
    """What ``serve``'s command line asks for."""

    model: str
    host: str
    port: int
    max_context: int | None
    lib: str | None
    kv_bits: str
    queue: int


def parse_serve(argv: Sequence[str]) -> BasertServeLine:
    """The serve line, each flag at most once (``--flag value`` or ``--flag=value``).

    Raises:
        UsageError: ``--model`` missing, an unknown flag, a flag without its value, a flag given
            twice, one option in both spellings (``--basert-lib`` and ``--lib``), a port outside 0-65535,
            a ``--max-context`` below 1, a ``--queue`` outside 0-4096, or a ``--kv-bits`` the adapter does
            not declare.
    """
    flags = flag_values(argv, _TAKES)
    lib = lib_flag(flags)
    if not flags.get("--model"):
        raise UsageError("serve needs --model PATH")
    host, port = listen_flags(flags)
    return BasertServeLine(model=flags["--model"], host=host, port=port, max_context=max_context_flag(flags), lib=lib,
                           kv_bits=kv_bits_flag(flags), queue=queue_flag(flags))


def _failed(e: SuperfluidError) -> RequestRefused:
    return RequestRefused(500, str(e), kind="server_error")


class _Generation:
    """The engine's state after the prompt: the token it predicts next, and the position to feed at."""

    def __init__(self, model: Model, first: int, position: int, n_ctx: int) -> None:
        self.model = model
        self.predicted = first
        self.position = position
        self.n_ctx = n_ctx

    def next_token(self) -> int:
        return self.predicted

    def feed(self, token: int) -> None:
        """``baseRT_decode_step(model, token, position)``.

        Raises:
            RequestRefused: 500 with the engine's error.
        """
        try:
            self.predicted = self.model.decode_step(token, self.position)
        except SuperfluidError as e:
            raise _failed(e) from e
        self.position += 1

    def full(self) -> bool:
        # the engine takes a token at `position` only while position + 1 < its max_seq_len
        return self.position + 1 >= self.n_ctx


class BasertEngine:
    """The serving engine interface (``runtime.serving.engine.Sequential``: one generation at a time) over
    one loaded baseRT model."""

    runtime_id = RUNTIME_ID

    def __init__(self, model: Model, model_id: str, n_ctx: int) -> None:
        self.model = model
        self.model_id = model_id
        self.model_path = model.path
        self.n_ctx = n_ctx
        self.eos = model.eos
        self.bos = model.bos

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """The beginning-of-text token, then the engine's tokens of ``text`` (it has no control
        tokens to read in text, so ``special`` changes nothing).

        Raises:
            RequestRefused: 400 when the engine refuses the text.
        """
        try:
            return [self.bos, *self.model.encode(text)]
        except SuperfluidError as e:
            raise RequestRefused(400, str(e), param="prompt") from e

    def chat_prompt(self, messages: Sequence[tuple[str, str]]) -> str:
        """Refused: a baseRT model file carries no chat template.

        Raises:
            RequestRefused: 400, always.
        """
        raise RequestRefused(400, f"the model {self.model_id} carries no chat template (baseRT model files have "
                                  f"none): send its prompt to /v1/completions", param="messages")

    @contextmanager
    def generation(self, prompt: list[int], sampling: Sampling | None = None) -> Iterator[_Generation]:
        """``baseRT_prefill`` of ``prompt`` (the engine restarts its sequence on each prefill).

        Raises:
            RequestRefused: 400 for ``sampling`` (the engine decodes greedily only); 500 with the
                engine's error.
        """
        if sampling is not None:
            raise RequestRefused(400, f"'temperature' {sampling.temperature:g}: the basert runtime decodes greedily "
                                      f"only (baseRT returns the next token, not a distribution to draw from); send "
                                      f"0 or leave it out", param="temperature")
        try:
            first = self.model.prefill(prompt)
        except SuperfluidError as e:
            raise _failed(e) from e
        yield _Generation(self.model, first, len(prompt), self.n_ctx)

    def is_eos(self, token: int) -> bool:
        return token == self.eos

    def piece(self, token: int) -> bytes:
        return self.model.token_bytes(token)

    def facts(self) -> dict[str, Any]:
        library = self.model.library
        return {"runtime": library.version, "abi": library.abi, "config_read": library.config_read,
                "library": library.path}

    def close(self) -> None:
        self.model.close()


def _load(line: BasertServeLine, lookup: Lookup) -> BasertEngine:
    """The judged library and the model.

    Raises:
        LibraryNotFound, LibraryRefused, AbiRefused: no libbaseRT this build drives (exit 1).
        ModelLoadFailed: the model is not a baseRT model file, or the engine could not load it (exit 3).
    """
    library = open_library(line.lib, lookup)
    why = looks_like_model(line.model)
    if why is not None:
        raise ModelLoadFailed(why)
    model = Model.load(library, line.model, line.max_context or 0)
    try:
        n_ctx = int(model.config().max_seq_len) or line.max_context or MAX_CONTEXT
        stem = os.path.basename(line.model)
        model_id = stem[: -len(".base")] if stem.lower().endswith(".base") else stem
        return BasertEngine(model, model_id, n_ctx)
    except BaseException:
        model.close()
        raise


def serve(argv: Sequence[str], lookup: Lookup, out: TextIO, gate: Callable[[], bool] | None = None) -> int:
    """``serve <argv...>``: load, then ``serving.http.serve_engine`` until SIGTERM/SIGINT; 0 on a clean close
    (and when ``gate``, asked once the engine is loaded, says no).

    Raises:
        UsageError: a bad command line (exit 2).
        ModelLoadFailed: the model did not load (exit 3).
        SuperfluidError: no libbaseRT this build drives, the address cannot be bound, or serving
            failed (exit 1).
    """
    line = parse_serve(argv)
    engine = _load(line, lookup)
    return serve_engine(engine, line.host, line.port, out, queue=line.queue, gate=gate)
