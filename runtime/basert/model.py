"""A model loaded through a judged libbaseRT: tokenize, greedy generation, detokenize."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from superfluid.runtime.basert.loader import Library, config_of
from superfluid.runtime.kernel.errors import ModelLoadFailed, SuperfluidError

if TYPE_CHECKING:
    from superfluid.runtime.basert.config import BaseRTModelConfig

__all__ = ["Model", "GenerationFailed", "MAGIC", "looks_like_model"]

MAGIC = b"BASE"


class GenerationFailed(SuperfluidError):
    """The engine reported an error while tokenizing or generating."""


def looks_like_model(path: str) -> str | None:
    """None when ``path`` is a file starting with the magic ``BASE``; else why it is not a model."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except IsADirectoryError:
        return f"{path} is a directory; the basert runtime reads a .base model file"
    except OSError as e:
        return f"cannot read {path}: {e.strerror or e}"
    if head != MAGIC:
        return f"{path} is not a baseRT model (it does not start with BASE)"
    return None


class Model:
    """A model handle; close it (or use ``with``) to free the engine's memory."""

    def __init__(self, library: Library, handle: int, path: str) -> None:
        self.library = library
        self.handle = handle
        self.path = path

    @classmethod
    def load(cls, library: Library, path: str, max_context: int = 0) -> Model:
        """``baseRT_load_model(path, NULL, max_context)``.

        Raises:
            ModelLoadFailed: the engine returned no handle (its error text and category).
        """
        handle = library.fn("baseRT_load_model")(path.encode(), None, int(max_context))
        if not handle:
            raise ModelLoadFailed(f"libbaseRT at {library.path} could not load the model {path}: "
                                  f"{_error(library)}")
        return cls(library, handle, path)

    def close(self) -> None:
        if self.handle:
            self.library.fn("baseRT_free_model")(self.handle)
            self.handle = 0

    def __enter__(self) -> Model:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def config(self) -> BaseRTModelConfig:
        """The model's configuration (through ``config_of``, the one reader)."""
        return config_of(self.library, self.handle)

    @property
    def bos(self) -> int:
        return int(self.library.fn("baseRT_bos_id")(self._open()))

    @property
    def eos(self) -> int:
        return int(self.library.fn("baseRT_eos_token_id")(self._open()))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``.

        Raises:
            GenerationFailed: the engine refused the text.
        """
        raw = text.encode("utf-8")
        capacity = len(raw) + 1  # a token is never shorter than a byte
        out = (ctypes.c_uint32 * capacity)()
        n = self.library.fn("baseRT_encode")(self._open(), raw, out, capacity)
        if n < 0:
            raise GenerationFailed(f"libbaseRT could not tokenize the prompt: {_error(self.library)}")
        return list(out[:n])

    def token_bytes(self, token: int) -> bytes:
        """``baseRT_decode_token``: the bytes of one token's text (a character may span tokens)."""
        return bytes(self.library.fn("baseRT_decode_token")(self._open(), token) or b"")

    def token_text(self, token: int) -> str:
        return self.token_bytes(token).decode("utf-8", "replace")

    def decode(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens``, concatenated."""
        return "".join(self.token_text(t) for t in tokens)

    def generate_tokens(self, prompt: str, max_tokens: int) -> list[int]:
        """Greedy continuation of ``prompt`` (after the begin token), up to ``max_tokens`` or the end token.

        Raises:
            GenerationFailed: the engine reported an error on a step.
        """
        tokens = [self.bos, *self.encode(prompt)]
        eos = self.eos
        nxt = self.prefill(tokens)
        out: list[int] = []
        position = len(tokens)
        while nxt != eos and len(out) < max_tokens:
            out.append(nxt)
            if len(out) == max_tokens:
                break
            nxt = self.decode_step(nxt, position)
            position += 1
        return out

    def prefill(self, tokens: Sequence[int]) -> int:
        """``baseRT_prefill``: the engine restarts its sequence with ``tokens``; the next token.

        Raises:
            GenerationFailed: the engine reported an error.
        """
        array = (ctypes.c_uint32 * len(tokens))(*tokens)
        nxt = int(self.library.fn("baseRT_prefill")(self._open(), array, len(tokens)))
        self._raise_on_error("prefill")
        return nxt

    def decode_step(self, token: int, position: int) -> int:
        """``baseRT_decode_step``: feed ``token`` at ``position``; the next token.

        Raises:
            GenerationFailed: the engine reported an error.
        """
        nxt = int(self.library.fn("baseRT_decode_step")(self._open(), token, position))
        self._raise_on_error("decode step")
        return nxt

    def generate(self, prompt: str, max_tokens: int = 64) -> str:
        """The text of ``generate_tokens(prompt, max_tokens)``."""
        return self.decode(self.generate_tokens(prompt, max_tokens))

    def _open(self) -> int:
        if not self.handle:
            raise GenerationFailed(f"the model {self.path} is closed")
        return self.handle

    def _raise_on_error(self, step: str) -> None:
        if int(self.library.fn("baseRT_get_error_code")()) != 0:
            raise GenerationFailed(f"libbaseRT failed on {step}: {_error(self.library)}")


def _error(library: Library) -> str:
    code = int(library.fn("baseRT_get_error_code")())
    text = (library.fn("baseRT_get_error")() or b"").decode("utf-8", "replace")
    name = (library.fn("baseRT_strerror")(code) or b"").decode("utf-8", "replace")
    return f"{text or 'no reason given'} ({name or code})"
