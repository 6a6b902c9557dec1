"""The serve flags every serving worker shares: each value read, or refused with the range it takes."""

from __future__ import annotations

import re

import pytest

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.serving.flags import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_QUEUE,
    int_flag,
    listen_flags,
    max_context_flag,
    queue_flag,
)


@pytest.mark.parametrize(("raw", "want"), [
    pytest.param("0", 0, id="the-low-end"),
    pytest.param("65535", 65535, id="the-high-end"),
    pytest.param("+8", 8, id="a-sign"),
    pytest.param(" 8 ", 8, id="spaces-around"),
])
def test_int_flag_reads_an_integer_in_range(raw: str, want: int) -> None:
    assert int_flag("--port", raw, 0, 65535) == want


@pytest.mark.parametrize("raw", [
    pytest.param("65536", id="above"),
    pytest.param("-1", id="below"),
    pytest.param("8.0", id="a-float"),
    pytest.param("", id="empty"),
    pytest.param("eighty", id="a-word"),
])
def test_int_flag_refuses_what_is_not_an_integer_in_range(raw: str) -> None:
    with pytest.raises(UsageError, match=f"^{re.escape(f'--port {raw!r}')}: expected an integer from 0 to 65535$"):
        int_flag("--port", raw, 0, 65535)


@pytest.mark.parametrize(("values", "want"), [
    pytest.param({}, (DEFAULT_HOST, DEFAULT_PORT), id="defaults"),
    pytest.param({"--host": "::1", "--port": "0"}, ("::1", 0), id="both"),
    pytest.param({"--port": "9000"}, ("127.0.0.1", 9000), id="a-port-alone"),
])
def test_listen_flags(values: dict[str, str], want: tuple[str, int]) -> None:
    assert listen_flags(values) == want


@pytest.mark.parametrize(("values", "message"), [
    pytest.param({"--host": ""}, "--host needs a value", id="an-empty-host"),
    pytest.param({"--port": "65536"}, "--port '65536': expected an integer from 0 to 65535", id="a-port-too-high"),
])
def test_listen_flags_refuse(values: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        listen_flags(values)
    assert str(caught.value) == message


def test_max_context_flag_is_1_to_2_to_the_24_or_absent() -> None:
    assert max_context_flag({}) is None
    assert max_context_flag({"--max-context": "1"}) == 1
    assert max_context_flag({"--max-context": str(1 << 24)}) == 1 << 24
    with pytest.raises(UsageError, match="^--max-context '0': expected an integer from 1 to 16777216$"):
        max_context_flag({"--max-context": "0"})


def test_queue_flag_is_0_to_4096_defaulting_to_16() -> None:
    assert queue_flag({}) == DEFAULT_QUEUE == 16
    assert queue_flag({"--queue": "0"}) == 0
    assert queue_flag({"--queue": "4096"}) == 4096
    with pytest.raises(UsageError, match="^--queue '4097': expected an integer from 0 to 4096$"):
        queue_flag({"--queue": "4097"})
