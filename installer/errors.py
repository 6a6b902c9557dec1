"""Typed installer errors, split by who is at fault."""

from __future__ import annotations

import time

from superfluid.runtime.kernel.errors import ELSEWHERE, SuperfluidError
from superfluid.runtime.kernel.fixes import FixLike
from superfluid.runtime.kernel.redact import redact_url

__all__ = [
    "ELSEWHERE",
    "StoreError",
    "DownloadError",
    "DownloadStalled",
    "HostUnreachable",
    "ConnectionRefused",
    "SizeExceeded",
    "RateLimited",
    "VerificationError",
    "ReleaseNotFound",
    "OfflineMissing",
    "ProvenanceRefused",
    "ProvenanceRequired",
]


class DownloadError(SuperfluidError):
    """A transfer of ``url`` failed: connection, HTTP status, protocol, stall or size cap.

    ``status`` is the HTTP status when the server answered, ``None`` for transport faults.
    ``retryable`` is true for faults another attempt may cure (connection errors, 5xx, 429, a
    stall, a body cut short); the retry loop reads it and nothing else. ``attempts`` is set by
    the retry loop when it gives up.
    """

    def __init__(
        self,
        url: str,
        reason: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        fix: FixLike = None,
        advice: str | None = None,
    ) -> None:
        url = redact_url(url)  # a URL's user:password@ is never shown
        super().__init__(f"{url}: {reason}", fix=fix, advice=advice)
        self.url = url
        self.reason = reason
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the server asked us to wait, if it did
        self.attempts = 1

    def gave_up(self, attempts: int) -> DownloadError:
        """Record that the retry loop stopped after ``attempts`` tries; returns ``self``."""
        self.attempts = attempts
        if attempts > 1:
            self.message = f"{self.message} (gave up after {attempts} attempts)"
        return self


class DownloadStalled(DownloadError):
    """No byte arrived within the stall timeout."""

    def __init__(self, url: str, seconds: float, *, received: int | None = None, trickle: int | None = None) -> None:
        got = f" after {received} bytes" if received else ""
        what = f"only {trickle} bytes in {seconds:g} s" if trickle is not None else f"no data for {seconds:g} s"
        super().__init__(
            url,
            f"{what}{got} (stall timeout)",
            retryable=True,
            advice="check the network or the mirror, then run the same command again (downloads resume)",
        )
        self.seconds = seconds
        self.received = received


class HostUnreachable(DownloadError):
    """The host's name does not resolve (DNS): no connection could be tried. Retried once only
    (``FetchConfig.unresolved_retries``): a name that did not resolve twice rarely resolves on the
    fifth try, and the user is better told at once where else the bytes can come from."""

    def __init__(self, url: str, host: str, detail: str) -> None:
        super().__init__(
            url,
            f"cannot reach {host}: its name does not resolve ({detail})",
            retryable=True,
            advice=f"check the network connection and DNS{ELSEWHERE}",
        )
        self.host = host


class ConnectionRefused(DownloadError):
    """Nothing listens at the address: the connection was refused. Retried once only
    (``FetchConfig.refused_retries``): a server that is not running is not cured by waiting, and
    the user is better told at once to start it or to take the bytes from elsewhere."""

    def __init__(self, url: str, address: str) -> None:
        super().__init__(
            url,
            f"connection refused by {address}: nothing listens there",
            retryable=True,
            advice=f"check that the server at {address} is running and that the URL names its port{ELSEWHERE}",
        )
        self.address = address


class SizeExceeded(DownloadError):
    """The body is larger than the cap: the declared size, or the configured bound when none is."""

    def __init__(self, url: str, limit: int, got: int) -> None:
        super().__init__(
            url,
            f"sent more than {limit} bytes (at least {got}); the cap is the size the release declares",
        )
        self.limit = limit
        self.got = got


def _when(reset_at: float, now: float) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(reset_at))
    left = max(0, int(reset_at - now + 0.999))
    if left < 60:
        return f"{stamp} (in {left} s)"
    return f"{stamp} (in {(left + 59) // 60} min)"


class RateLimited(DownloadError):
    """The API refused for a rate limit (403/429 with ``X-RateLimit-Remaining: 0``, or 429).

    ``reset_at`` is the epoch second the limit resets (``X-RateLimit-Reset``), ``retry_after`` the
    seconds ``Retry-After`` asked for; either may be ``None``. The message says when it resets.
    """

    def __init__(
        self,
        url: str,
        *,
        status: int,
        reset_at: float | None = None,
        retry_after: float | None = None,
        limit: int | None = None,
        retryable: bool = False,
        authenticated: bool = False,
        now: float | None = None,
    ) -> None:
        now = time.time() if now is None else now
        if reset_at is None and retry_after is not None:
            reset_at = now + retry_after
        what = "rate limit exceeded" + (f" ({limit} requests an hour)" if limit else "")
        when = f"; it resets at {_when(reset_at, now)}" if reset_at is not None else ""
        if authenticated:
            advice = "wait until then, or use --mirror URL|DIR or --offline"
        else:
            advice = "wait until then, set GITHUB_TOKEN (or GH_TOKEN) for a higher limit, or use --mirror URL|DIR"
        super().__init__(
            url,
            f"HTTP {status}: {what}{when}",
            status=status,
            retryable=retryable,
            retry_after=retry_after,
            advice=advice,
        )
        self.reset_at = reset_at
        self.limit = limit


class VerificationError(SuperfluidError):
    """Downloaded bytes are not the ones we accept; nothing of them was kept.

    ``what`` is ``"sha256"`` or ``"size"``; ``expected`` and ``got`` are both named in the message.
    """

    def __init__(self, url: str, what: str, expected: str, got: str, *, fix: FixLike = None,
                 advice: str | None = None) -> None:
        if what == "sha256":
            fault = f"SHA-256 {got}, expected {expected} (not the file its project published)"
        else:
            fault = f"{got} bytes, expected {expected}"
        super().__init__(
            f"{url}: {fault}",
            fix=fix,
            advice=advice if advice is not None or fix else "nothing was installed or cached; if it persists, the "
            "source or a mirror is serving other bytes",
        )
        self.url = url
        self.what = what
        self.expected = expected
        self.got = got


class ReleaseNotFound(SuperfluidError):
    """The repository, release tag or asset is not published at the source asked."""

    def __init__(self, repo: str, what: str, *, where: str, fix: FixLike = None, advice: str | None = None) -> None:
        super().__init__(f"{repo}: {what} not found at {where}", fix=fix, advice=advice)
        self.repo = repo
        self.what = what
        self.where = where


class OfflineMissing(SuperfluidError):
    """``--offline`` and the cache lacks ``what``; no connection was opened."""

    def __init__(self, what: str, *, url: str | None = None, fix: FixLike = None, advice: str | None = None) -> None:
        detail = f" ({url})" if url else ""
        super().__init__(
            f"offline: the cache holds no {what}{detail}",
            fix=fix,
            advice=advice if advice is not None or fix else "run the same command once without --offline to fill "
            "the cache",
        )
        self.what = what
        self.url = url


class StoreError(SuperfluidError):
    """The home could not be changed as asked (a filesystem fault, or an inconsistent request)."""


# -- provenance (docs/install.md, "Provenance"): installer/trust/provenance.py verifies a bundle --------

#: what to do about a refusal, by its step
_ADVICE = {
    "identity": "use the file only if that workflow is one you trust to build it; otherwise get it from the "
                "repository and workflow named",
    "bytes": "the bundle is another file's: get the one made for these bytes, or check the file came from where "
             "you expected",
    "bundle": "give the Sigstore bundle (.sigstore.json) the workflow made for this file",
    "statement": "give the build provenance attestation of the file (what actions/attest-build-provenance makes)",
}
_TAMPERED = ("the bundle was altered, or made under another Sigstore: get it again from where the file came from, "
             "or name that Sigstore's trusted root")


class ProvenanceRefused(SuperfluidError):
    """A bundle that does not prove what was asked (exit 1): ``step`` is the check that failed
    (``bundle``, ``time``, ``certificate``, ``log``, ``signature``, ``bytes``, ``statement``, ``identity``);
    ``wanted`` and ``found`` the identities or digests, when those are what differ."""

    def __init__(self, named: str, step: str, fault: str, *, wanted: str | None = None,
                 found: str | None = None, advice: str | None = None) -> None:
        super().__init__(f"{named}: {fault}", advice=advice or _ADVICE.get(step, _TAMPERED))
        self.named = named
        self.step = step
        self.fault = fault
        self.wanted = wanted
        self.found = found


class ProvenanceRequired(SuperfluidError):
    """An asset with no Sigstore bundle, where provenance is required (``--require-provenance``, a lock's
    ``provenance = "required"``): refused before anything is fetched or staged (exit 1)."""
