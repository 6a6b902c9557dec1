"""``installer/config.FetchConfig``: the network limits, checked on construction, and the backoff."""

from __future__ import annotations

import pytest

from superfluid.installer.config import FetchConfig


def test_the_defaults_hold() -> None:
    c = FetchConfig()
    assert (c.retries, c.backoff_base, c.backoff_max, c.listing_per_page, c.parallel) == (4, 0.5, 20.0, 100, 4)
    assert (c.rehash_cached, c.fsync) == (True, False)


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("retries", -1, "FetchConfig.retries must not be negative, got -1"),
    ("backoff_base", -0.1, "FetchConfig.backoff_base must not be negative"),
    ("chunk_size", 0, "FetchConfig.chunk_size must be positive, got 0"),
    ("stall_timeout", 0.0, "FetchConfig.stall_timeout must be positive"),
    ("patience", 0, "FetchConfig.patience must be positive"),
    ("parallel", 0, "FetchConfig.parallel must be positive"),
    ("max_download_bytes", 0, "FetchConfig.max_download_bytes must be positive"),
    ("listing_per_page", 101, "FetchConfig.listing_per_page must be 1..100, got 101"),
    ("listing_per_page", 0, "FetchConfig.listing_per_page must be positive"),
])
def test_a_limit_out_of_range_is_refused(field: str, value: float, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace(".", r"\.")):
        FetchConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value"), [("retries", 0), ("backoff_base", 0.0), ("listing_per_page", 1),
                                              ("listing_per_page", 100), ("max_redirects", 0), ("fsync", True)])
def test_an_edge_in_range_is_accepted(field: str, value: float) -> None:
    assert getattr(FetchConfig(**{field: value}), field) == value  # type: ignore[arg-type]


@pytest.mark.parametrize(("attempt", "seconds"), [(0, 0.5), (1, 1.0), (3, 4.0), (5, 16.0), (6, 20.0), (40, 20.0)])
def test_backoff_doubles_up_to_its_cap(attempt: int, seconds: float) -> None:
    assert FetchConfig().backoff(attempt) == seconds


def test_backoff_zero_never_waits() -> None:
    assert FetchConfig(backoff_base=0).backoff(10) == 0.0
