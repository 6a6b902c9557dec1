"""``runtime/completions``: the OpenAI request bodies a serving worker reads (each refusal a 400
naming its field) and the shapes it answers in."""

from __future__ import annotations

import json
from typing import Any

import pytest

from superfluid.runtime.serving.completions import (
    CompletionRequest,
    RequestRefused,
    Sampling,
    answer,
    chunk,
    parse_chat,
    parse_completion,
    usage_chunk,
)


def body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def completion(*, max_tokens: int | None = 16, stop: tuple[str, ...] = (), **fields: Any) -> CompletionRequest:
    """A completion request of prompt ``x`` (by default of the default ``max_tokens``, no stop), and ``fields``."""
    return CompletionRequest(prompt="x", max_tokens=max_tokens, stop=stop, **fields)


@pytest.mark.parametrize(("fields", "want"), [
    pytest.param({"prompt": "x"}, completion(), id="defaults"),
    pytest.param({"prompt": ["x"], "model": "anything"}, completion(model="anything"), id="a-list-of-one"),
    pytest.param({"prompt": "x", "max_tokens": 1, "stop": "\n"}, completion(max_tokens=1, stop=("\n",)),
                 id="stop-string"),
    pytest.param({"prompt": "x", "stop": ["a", "", "b", "c"]}, completion(stop=("a", "b", "c")),
                 id="empty-stops-dropped"),
    pytest.param({"prompt": "x", "stream": True, "stream_options": {"include_usage": True}},
                 completion(stream=True, include_usage=True), id="stream-with-usage"),
    pytest.param({"prompt": "x", "temperature": 0, "top_p": 0.5, "seed": 3}, completion(),
                 id="temperature-0-is-greedy"),
    pytest.param({"prompt": "x", "temperature": 0.7}, completion(sampling=Sampling(0.7)), id="sampling-defaults"),
    pytest.param({"prompt": "x", "temperature": 2, "top_p": 1, "top_k": 40, "seed": -5},
                 completion(sampling=Sampling(2.0, 1.0, 40, -5)), id="sampling-edges"),
    pytest.param({"prompt": "x", "n": 1, "best_of": 1, "echo": False, "presence_penalty": 0, "user": "u"},
                 completion(), id="what-changes-nothing"),
])
def test_parse_completion(fields: dict[str, Any], want: CompletionRequest) -> None:
    assert parse_completion(body(**fields)) == want


@pytest.mark.parametrize(("raw", "param", "says"), [
    pytest.param(b"{", None, "the body is not valid JSON", id="not-json"),
    pytest.param(b"[]", None, "the body must be a JSON object (it is a list)", id="a-list"),
    pytest.param(b"\xff", None, "the body is not valid JSON", id="not-utf-8"),
    pytest.param(body(prompt="x", model=3), "model", "'model' must be a string", id="model"),
    pytest.param(body(prompt=["a", "b"]), "prompt", "'prompt' must be a string (or a list of one string)",
                 id="prompts"),
    pytest.param(body(), "prompt", "'prompt' must be a string", id="no-prompt"),
    pytest.param(body(prompt="x", max_tokens=0), "max_tokens",
                 "'max_tokens' must be an integer of at least 1 (it is 0)",
                 id="max-tokens-0"),
    pytest.param(body(prompt="x", max_tokens=True), "max_tokens", "(it is true)", id="max-tokens-bool"),
    pytest.param(body(prompt="x", stop=["a"] * 5), "stop", "at most 4 strings", id="five-stops"),
    pytest.param(body(prompt="x", stop=[1]), "stop", "'stop' must be a string", id="stop-a-number"),
    pytest.param(body(prompt="x", temperature=2.5), "temperature", "'temperature' must be a number from 0 to 2 "
                 "(it is 2.5); 0 decodes greedily", id="too-hot"),
    pytest.param(body(prompt="x", temperature="1"), "temperature", "(it is \"1\")", id="temperature-text"),
    pytest.param(body(prompt="x", top_p=0), "top_p", "'top_p' must be a number above 0 and at most 1", id="top-p-0"),
    pytest.param(body(prompt="x", top_k=-1), "top_k", "'top_k' must be an integer of at least 0", id="top-k"),
    pytest.param(body(prompt="x", seed=1.5), "seed", "'seed' must be an integer (it is 1.5)", id="seed"),
    pytest.param(body(prompt="x", stream="yes"), "stream", "'stream' must be true or false", id="stream"),
    pytest.param(body(prompt="x", stream_options={"include_usage": 1}), "stream_options",
                 "'stream_options.include_usage' must be true or false", id="include-usage"),
    pytest.param(body(prompt="x", n=2), "n", "'n' 2: this server returns one choice", id="n"),
    pytest.param(body(prompt="x", best_of=3), "best_of", "'best_of' 3", id="best-of"),
    pytest.param(body(prompt="x", echo=True), "echo", "does not echo the prompt", id="echo"),
    pytest.param(body(prompt="x", suffix="s"), "suffix", "'suffix': this server does not support it", id="suffix"),
    pytest.param(body(prompt="x", logit_bias={"1": 2}), "logit_bias", "does not support it", id="logit-bias"),
    pytest.param(body(prompt="x", frequency_penalty=0.5), "frequency_penalty", "decodes without penalties",
                 id="penalty"),
])
def test_parse_completion_refuses(raw: bytes, param: str | None, says: str) -> None:
    with pytest.raises(RequestRefused) as caught:
        parse_completion(raw)
    assert (caught.value.status, caught.value.param, caught.value.kind) == (400, param, "invalid_request_error")
    assert says in caught.value.message


def test_a_chats_messages_and_their_text() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    got = parse_chat(body(messages=[{"role": "system", "content": None}, {"role": "user", "content": parts}],
                          logprobs=False, stop="x"))
    assert got.messages == (("system", ""), ("user", "ab")) and got.chat and got.prompt == ""
    assert (got.max_tokens, got.stop) == (None, ("x",))
    assert not parse_completion(body(prompt="x")).chat


@pytest.mark.parametrize(("parse", "body", "param", "says"), [
    (parse_chat, {"messages": []}, "messages", "'messages' must be a non-empty list"),
    (parse_chat, {"messages": [{"content": "x"}]}, "messages", "'messages[0].role' must be a non-empty string"),
    (parse_chat, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages", "text parts only"),
    (parse_chat, {"messages": [{"role": "user", "content": "x"}], "tools": [{}]}, "tools", "does not support it"),
    (parse_chat, {"messages": [{"role": "user", "content": "x"}], "logprobs": True}, "logprobs", "does not support"),
    (parse_completion, {"prompt": "x", "stream_options": 3}, "stream_options", "'stream_options' must be an object"),
    (parse_completion, {"prompt": "x", "logprobs": 2}, "logprobs", "does not support it"),
])
def test_what_this_server_does_not_do_is_refused(parse: Any, body: dict[str, Any], param: str, says: str) -> None:
    with pytest.raises(RequestRefused) as e:
        parse(json.dumps(body).encode())
    assert e.value.status == 400 and e.value.param == param and says in e.value.message


def test_a_chats_max_tokens_defaults_to_the_context_and_takes_either_name() -> None:
    chat = [{"role": "user", "content": "x"}]
    assert parse_chat(json.dumps({"messages": chat}).encode()).max_tokens is None
    assert parse_chat(json.dumps({"messages": chat, "max_tokens": 5}).encode()).max_tokens == 5
    assert parse_chat(json.dumps({"messages": chat, "max_tokens": 5, "max_completion_tokens": 3}).encode()
                      ).max_tokens == 3
    assert parse_completion(b'{"prompt": "x"}').max_tokens == 16


REQUEST = completion()
CHAT_REQUEST = CompletionRequest(prompt="", max_tokens=None, stop=(), include_usage=True, messages=(("user", "x"),))


def test_answers_of_each_endpoint() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
             "prompt_tokens_details": {"cached_tokens": 1}}
    assert answer(REQUEST, "cmpl-1", 7, "m", " the", "length", 3, 2, 1) == {
        "id": "cmpl-1", "object": "text_completion", "created": 7, "model": "m", "usage": usage,
        "choices": [{"text": " the", "index": 0, "finish_reason": "length", "logprobs": None}]}
    assert answer(CHAT_REQUEST, "c", 7, "m", "hi", "stop", 3, 2, 0)["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop", "logprobs": None}]
    assert answer(CHAT_REQUEST, "c", 7, "m", "hi", "stop", 3, 2, 0)["object"] == "chat.completion"


@pytest.mark.parametrize(("request_", "text", "finish", "choice"), [
    pytest.param(REQUEST, " a", None, {"text": " a", "index": 0, "finish_reason": None, "logprobs": None}, id="text"),
    pytest.param(REQUEST, None, "stop", {"text": "", "index": 0, "finish_reason": "stop", "logprobs": None},
                 id="text-last"),
    pytest.param(CHAT_REQUEST, None, None, {"index": 0, "delta": {"role": "assistant", "content": ""},
                                            "finish_reason": None, "logprobs": None}, id="chat-opening"),
    pytest.param(CHAT_REQUEST, "b", None, {"index": 0, "delta": {"content": "b"}, "finish_reason": None,
                                           "logprobs": None}, id="chat-text"),
    pytest.param(CHAT_REQUEST, "", "length", {"index": 0, "delta": {}, "finish_reason": "length", "logprobs": None},
                 id="chat-last"),
])
def test_chunks(request_: CompletionRequest, text: str | None, finish: str | None, choice: dict[str, Any]) -> None:
    got = chunk(request_, "i", 1, "m", text, finish)
    assert got["choices"] == [choice]
    assert ("usage" in got) is request_.include_usage and got.get("usage") is None
    assert got["object"] == ("chat.completion.chunk" if request_.chat else "text_completion")


def test_the_usage_chunk_has_no_choices() -> None:
    assert usage_chunk(CHAT_REQUEST, "i", 1, "m", 4, 6, 2) == {
        "id": "i", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
        "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10,
                  "prompt_tokens_details": {"cached_tokens": 2}}}


def test_a_refusal_as_json() -> None:
    refused = RequestRefused(503, "busy", kind="server_error", code="busy", headers={"Retry-After": "1"})
    assert refused.to_json() == {"error": {"message": "busy", "type": "server_error", "param": None, "code": "busy"}}
    assert refused.headers == {"Retry-After": "1"}


def test_an_unknown_chat_role_is_refused_naming_messages() -> None:
    with pytest.raises(RequestRefused) as e:
        parse_chat(json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}]})
                   .encode())
    assert (e.value.status, e.value.param) == (400, "messages")
    assert "'messages[1].role' \"wizard\" is not a role" in e.value.message
    for role in ("system", "developer", "user", "assistant", "tool"):
        assert parse_chat(json.dumps({"messages": [{"role": role, "content": "x"}]}).encode()).messages == (
            (role, "x"),)
