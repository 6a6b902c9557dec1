"""``installer/errors``: each download and verification fault's message (the URL never with its
credentials), whether another attempt may help, and when a rate limit resets."""

from __future__ import annotations

import pytest

from superfluid.installer.errors import (
    DownloadError,
    DownloadStalled,
    HostUnreachable,
    OfflineMissing,
    RateLimited,
    ReleaseNotFound,
    SizeExceeded,
    VerificationError,
)
from superfluid.runtime.kernel.errors import SuperfluidError

URL = "https://h.test/x.tar.gz"
NOW = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC


@pytest.mark.parametrize(("error", "message", "retryable"), [
    pytest.param(DownloadError("https://u:pw@h.test/x.tar.gz", "HTTP 500", status=500, retryable=True),
                 "https://h.test/x.tar.gz: HTTP 500", True, id="download-redacted"),
    pytest.param(DownloadStalled(URL, 2.0), f"{URL}: no data for 2 s (stall timeout): check the network or the "
                 "mirror, then run the same command again (downloads resume)", True, id="stalled"),
    pytest.param(DownloadStalled(URL, 1.5, received=4096, trickle=10),
                 f"{URL}: only 10 bytes in 1.5 s after 4096 bytes (stall timeout)", True, id="trickle"),
    pytest.param(HostUnreachable(URL, "h.test", "Name or service not known"),
                 f"{URL}: cannot reach h.test: its name does not resolve (Name or service not known): check the "
                 "network connection and DNS", True, id="unresolved"),
    pytest.param(SizeExceeded(URL, 100, 4096),
                 f"{URL}: sent more than 100 bytes (at least 4096); the cap is the size the release declares", False,
                 id="size"),
    pytest.param(VerificationError(URL, "sha256", "a" * 64, "b" * 64),
                 f"{URL}: SHA-256 {'b' * 64}, expected {'a' * 64} (not the file its project published): nothing was "
                 "installed or cached", None, id="digest"),
    pytest.param(VerificationError(URL, "size", "10", "9", advice="report it"),
                 f"{URL}: 9 bytes, expected 10: report it", None, id="size-mismatch"),
    pytest.param(ReleaseNotFound("o/r", "release v9", where="/srv/mirror"), "o/r: release v9 not found at /srv/mirror",
                 None, id="not-found"),
    pytest.param(OfflineMissing("download of x.tar.gz", url=URL),
                 f"offline: the cache holds no download of x.tar.gz ({URL}): run the same command once without "
                 "--offline to fill the cache", None, id="offline"),
    pytest.param(OfflineMissing("listing", advice="copy a mirror"),
                 "offline: the cache holds no listing: copy a mirror", None, id="offline-with-advice"),
])
def test_message(error: SuperfluidError, message: str, retryable: bool | None) -> None:
    assert str(error).startswith(message)
    if retryable is not None:
        assert isinstance(error, DownloadError) and error.retryable is retryable


def test_gave_up_counts_the_attempts() -> None:
    once = DownloadError(URL, "HTTP 503").gave_up(1)
    assert once.attempts == 1 and str(once) == f"{URL}: HTTP 503"
    many = DownloadError(URL, "HTTP 503", advice="try later").gave_up(5)
    assert many.attempts == 5 and str(many) == f"{URL}: HTTP 503 (gave up after 5 attempts): try later"


@pytest.mark.parametrize(("kwargs", "says"), [
    pytest.param({"reset_at": NOW + 30}, "it resets at 2026-01-01 00:00:30 UTC (in 30 s)", id="seconds"),
    pytest.param({"reset_at": NOW + 59.5}, "(in 1 min)", id="rounded-up-to-a-minute"),
    pytest.param({"reset_at": NOW + 61}, "(in 2 min)", id="minutes-rounded-up"),
    pytest.param({"reset_at": NOW - 5}, "(in 0 s)", id="already-past"),
    pytest.param({"retry_after": 120.0}, "it resets at 2026-01-01 00:02:00 UTC (in 2 min)", id="from-retry-after"),
    pytest.param({"limit": 60}, "HTTP 403: rate limit exceeded (60 requests an hour): wait", id="no-reset"),
])
def test_rate_limited_says_when_it_resets(kwargs: dict[str, float], says: str) -> None:
    error = RateLimited(URL, status=403, now=NOW, **kwargs)  # type: ignore[arg-type]
    assert says in str(error) and error.status == 403


def test_rate_limited_fix_depends_on_a_token() -> None:
    anonymous = RateLimited(URL, status=429, now=NOW)
    assert str(anonymous).endswith("set GITHUB_TOKEN (or GH_TOKEN) for a higher limit, or use --mirror URL|DIR")
    assert str(RateLimited(URL, status=429, now=NOW, authenticated=True)).endswith(
        "wait until then, or use --mirror URL|DIR or --offline")
    assert anonymous.reset_at is None and not anonymous.retryable
