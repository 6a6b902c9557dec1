"""The OpenAI request bodies a serving worker reads and the shapes it answers in."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from superfluid.runtime.kernel.jsonread import UntrustedJson, loads

__all__ = ["RequestRefused", "Sampling", "CompletionRequest", "parse_completion", "parse_chat", "answer", "chunk",
           "usage_chunk", "DEFAULT_MAX_TOKENS", "MAX_TEMPERATURE", "ROLES"]

#: OpenAI's default for a completion's max_tokens
DEFAULT_MAX_TOKENS = 16
#: OpenAI's bound on temperature
MAX_TEMPERATURE = 2.0


class RequestRefused(Exception):
    """A request the server answers with an error object (status, message, OpenAI error type).

    ``headers`` are sent with the answer (``Retry-After`` on a 503).
    """

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def to_json(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True, slots=True)
class Sampling:
    """How the next token is drawn when ``temperature`` > 0 (a request without it decodes greedily)."""

    temperature: float
    top_p: float = 1.0
    top_k: int = 0  # 0: every token stays a candidate
    seed: int | None = None  # None: the server picks one per request


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionRequest:
    """A checked request of either endpoint: a completion has ``prompt``, a chat ``messages``."""

    prompt: str
    max_tokens: int | None  # None: until the end of generation or of the context
    stop: tuple[str, ...]
    stream: bool = False
    include_usage: bool = False
    sampling: Sampling | None = None
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content) of a chat, in order
    model: str | None = None  # the model asked for (None: not named, the served one)

    @property
    def chat(self) -> bool:
        return self.messages is not None


#: the roles of a chat message (OpenAI's, ``developer`` being its newer name for ``system``)
ROLES = ("system", "developer", "user", "assistant", "tool")


def _model(data: Mapping[str, Any]) -> str | None:
    model = data.get("model")
    return model or None


def _refuse(message: str, param: str | None = None) -> RequestRefused:
    return RequestRefused(400, message, param=param)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _object(body: bytes) -> dict[str, Any]:
    try:  # the HTTP layer capped its size (serving.http.MAX_BODY); the gate adds depth and strict UTF-8
        data = loads(body, max_bytes=max(len(body), 1))
    except UntrustedJson as e:
        raise _refuse(f"the body is not valid JSON ({e.detail})") from None
    if not isinstance(data, dict):
        raise _refuse(f"the body must be a JSON object (it is a {type(data).__name__})")
    if "model" in data and data["model"] is not None and not isinstance(data["model"], str):
        raise _refuse("'model' must be a string", "model")
    return data


def _stops(stop: Any) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop) and len(stop) <= 4:
        return tuple(s for s in stop if s)
    raise _refuse("'stop' must be a string or a list of at most 4 strings", "stop")


def _max_tokens(data: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = data.get(key)
    if value is None:
        return default
    if not _integer(value) or value < 1:
        raise _refuse(f"{key!r} must be an integer of at least 1 (it is {json.dumps(value)})", key)
    return int(value)


def _sampling(data: Mapping[str, Any]) -> Sampling | None:
    """The sampling settings, or None for greedy decoding (no temperature, or 0)."""
    temperature = data.get("temperature")
    if temperature is not None and (not _number(temperature) or not 0 <= temperature <= MAX_TEMPERATURE):
        raise _refuse(f"'temperature' must be a number from 0 to {MAX_TEMPERATURE:g} (it is "
                      f"{json.dumps(temperature)}); 0 decodes greedily", "temperature")
    top_p = data.get("top_p")
    if top_p is not None and (not _number(top_p) or not 0 < top_p <= 1):
        raise _refuse(f"'top_p' must be a number above 0 and at most 1 (it is {json.dumps(top_p)})", "top_p")
    top_k = data.get("top_k")
    if top_k is not None and (not _integer(top_k) or top_k < 0):
        raise _refuse(f"'top_k' must be an integer of at least 0 (it is {json.dumps(top_k)}); 0 keeps every "
                      f"token", "top_k")
    seed = data.get("seed")
    if seed is not None and not _integer(seed):
        raise _refuse(f"'seed' must be an integer (it is {json.dumps(seed)})", "seed")
    if not temperature:
        return None
    return Sampling(float(temperature), 1.0 if top_p is None else float(top_p), int(top_k or 0), seed)


def _stream(data: Mapping[str, Any]) -> tuple[bool, bool]:
    """``(stream, include_usage)``."""
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _refuse("'stream' must be true or false", "stream")
    options = data.get("stream_options")
    if options is None:
        return bool(stream), False
    if not isinstance(options, dict):
        raise _refuse("'stream_options' must be an object", "stream_options")
    include = options.get("include_usage")
    if include is not None and not isinstance(include, bool):
        raise _refuse("'stream_options.include_usage' must be true or false", "stream_options")
    return bool(stream), bool(include)


def _refuse_unsupported(data: Mapping[str, Any], *, chat: bool) -> None:
    """400 for what this server does not do, rather than ignoring it."""
    for key in ("n", "best_of"):
        if data.get(key) not in (None, 1):
            raise _refuse(f"{key!r} {json.dumps(data[key])}: this server returns one choice; send 1 or leave it out",
                          key)
    if data.get("echo"):
        raise _refuse("'echo': this server does not echo the prompt; leave it out or send false", "echo")
    # a chat's logprobs is a flag (false is fine); a completion's is a number (any is refused)
    unsupported = ("top_logprobs",) if chat else ("logprobs", "suffix")
    for key in unsupported:
        if data.get(key) is not None:
            raise _refuse(f"{key!r}: this server does not support it; leave it out", key)
    for key in ("logit_bias", "tools", "functions", *(("logprobs",) if chat else ())):
        if data.get(key):
            raise _refuse(f"{key!r}: this server does not support it; leave it out", key)
    for key in ("presence_penalty", "frequency_penalty"):
        value = data.get(key)
        if value is not None and (not _number(value) or value != 0):
            raise _refuse(f"{key!r} {json.dumps(value)}: this server decodes without penalties; send 0 or leave it "
                          f"out", key)


def parse_completion(body: bytes) -> CompletionRequest:
    """Check a ``/v1/completions`` body.

    Raises:
        RequestRefused: 400 for a body that is not a JSON object, a field of the wrong type or out
            of range, or a request for something this server does not do (several choices, echo...).
    """
    data = _object(body)
    prompt = data.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise _refuse("'prompt' must be a string (or a list of one string)", "prompt")
    max_tokens = _max_tokens(data, "max_tokens", DEFAULT_MAX_TOKENS)
    sampling = _sampling(data)
    stops = _stops(data.get("stop"))
    stream, include_usage = _stream(data)
    _refuse_unsupported(data, chat=False)
    return CompletionRequest(prompt=prompt, max_tokens=max_tokens, stop=stops, stream=stream,
                             include_usage=include_usage, sampling=sampling, model=_model(data))


def _content(value: Any, where: str) -> str:
    """A message's content: a string, null, or a list of text parts (joined)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise _refuse(f"'{where}.content': this server reads text parts only ({{\"type\": \"text\", "
                              f"\"text\": ...}})", "messages")
            texts.append(part["text"])
        return "".join(texts)
    raise _refuse(f"'{where}.content' must be a string or a list of text parts", "messages")


def _messages(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise _refuse("'messages' must be a non-empty list of {\"role\", \"content\"} objects", "messages")
    out = []
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _refuse(f"'{where}' must be an object with a role and a content", "messages")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise _refuse(f"'{where}.role' must be a non-empty string (system, user, assistant...)", "messages")
        if role not in ROLES:
            raise _refuse(f"'{where}.role' {json.dumps(role)[:40]} is not a role: give one of {', '.join(ROLES)}",
                          "messages")
        out.append((role, _content(message.get("content"), where)))
    return tuple(out)


def parse_chat(body: bytes) -> CompletionRequest:
    """Check a ``/v1/chat/completions`` body (``max_completion_tokens`` wins over ``max_tokens``).

    Raises:
        RequestRefused: 400 as ``parse_completion``, and for messages that are not a non-empty list
            of objects with a role and text content.
    """
    data = _object(body)
    messages = _messages(data.get("messages"))
    key = "max_completion_tokens" if data.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = _max_tokens(data, key, None)
    sampling = _sampling(data)
    stops = _stops(data.get("stop"))
    stream, include_usage = _stream(data)
    _refuse_unsupported(data, chat=True)
    return CompletionRequest(prompt="", max_tokens=max_tokens, stop=stops, stream=stream,
                             include_usage=include_usage, sampling=sampling, messages=messages, model=_model(data))


def _usage(n_prompt: int, n_out: int, n_cached: int) -> dict[str, Any]:
    """OpenAI's usage: ``prompt_tokens_details.cached_tokens`` are the prompt tokens the engine
    already held from an earlier request (not decoded again)."""
    return {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out,
            "prompt_tokens_details": {"cached_tokens": n_cached}}


def answer(request: CompletionRequest, ident: str, created: int, model: str, text: str, finish: str,
           n_prompt: int, n_out: int, n_cached: int) -> dict[str, Any]:
    """The whole answer: a ``text_completion``, or a ``chat.completion`` for a chat."""
    if request.chat:
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": finish, "logprobs": None}
        kind = "chat.completion"
    else:
        choice = {"text": text, "index": 0, "finish_reason": finish, "logprobs": None}
        kind = "text_completion"
    return {"id": ident, "object": kind, "created": created, "model": model, "choices": [choice],
            "usage": _usage(n_prompt, n_out, n_cached)}


def chunk(request: CompletionRequest, ident: str, created: int, model: str, text: str | None,
          finish: str | None) -> dict[str, Any]:
    """One streamed chunk: ``text`` (for a chat, None is the opening delta that names the role),
    ``finish`` on the last one."""
    if request.chat:
        delta = {"role": "assistant", "content": ""} if text is None else ({"content": text} if text else {})
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        kind = "chat.completion.chunk"
    else:
        choice = {"text": text or "", "index": 0, "finish_reason": finish, "logprobs": None}
        kind = "text_completion"
    out: dict[str, Any] = {"id": ident, "object": kind, "created": created, "model": model, "choices": [choice]}
    if request.include_usage:
        out["usage"] = None  # as OpenAI: every chunk but the last carries a null usage
    return out


def usage_chunk(request: CompletionRequest, ident: str, created: int, model: str, n_prompt: int,
                n_out: int, n_cached: int) -> dict[str, Any]:
    """The last chunk of a stream asked with ``include_usage``: no choices, the usage."""
    kind = "chat.completion.chunk" if request.chat else "text_completion"
    return {"id": ident, "object": kind, "created": created, "model": model, "choices": [],
            "usage": _usage(n_prompt, n_out, n_cached)}
