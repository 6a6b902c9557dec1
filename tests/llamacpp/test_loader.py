"""``runtime/llamacpp/loader``'s pure part: the tail of llama.cpp's log kept for a load failure's
reason."""

from __future__ import annotations

from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.llamacpp.loader import LOG_ENV, LogTail, echoes_log


def test_the_log_tail_keeps_the_last_error_lines_only() -> None:
    tail = LogTail()
    tail(2, b"info line\n", None)
    tail(4, b"llama_model_load: error loading model: ", None)
    tail(5, b"bad magic\n", None)
    for i in range(10):
        tail(4, f"error {i}\n".encode(), None)
    assert len(tail.errors) == 8 and tail.errors[-1] == "error 9"
    tail.errors.clear()
    tail(4, b"llama_model_load: error loading model: ", None)
    tail(5, b"bad magic\n", None)
    assert tail.last() == "llama_model_load: error loading model: bad magic"


def test_the_log_is_echoed_only_when_its_variable_is_1() -> None:
    assert echoes_log(read({LOG_ENV: "1"})) is True
    assert [echoes_log(read(env)) for env in ({}, {LOG_ENV: ""}, {LOG_ENV: "0"}, {LOG_ENV: "yes"})] == [False] * 4

