"""Fixtures of the transport's tests: a ``RequestsFetcher`` whose waits are recorded, not slept."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from superfluid.installer.config import FetchConfig
from superfluid.installer.transport.requests_fetcher import RequestsFetcher


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def rf(sleeps: list[float]) -> Iterator[RequestsFetcher]:
    f = RequestsFetcher(FetchConfig(retries=3, backoff_base=0.5, backoff_max=4.0), sleep=sleeps.append,
                        clock=lambda: 1_000_000.0)
    yield f
    f.close()
