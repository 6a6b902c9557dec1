"""Typed refusals of a manifest service's answers by their TUF metadata, one class per attack.

See docs/manifest-service.md, "What each check stops".
"""

from __future__ import annotations

from superfluid.runtime.kernel.errors import SuperfluidError, UsageError

__all__ = ["FreshnessError", "RollbackRefused", "FreezeRefused", "UntrustedSigner", "MixAndMatch", "EndlessData",
           "AnswerMismatch", "NoFreshness", "NotListed", "NoTrustRoot"]


class FreshnessError(SuperfluidError):
    """The service's signed index failed a TUF check; ``service`` is its URL, ``role`` the metadata
    (``root``, ``timestamp``, ``snapshot``, ``targets``) or ``None`` for an answer."""

    def __init__(self, service: str, message: str, *, role: str | None = None, advice: str | None = None) -> None:
        super().__init__(message, advice=advice)
        self.service = service
        self.role = role


class RollbackRefused(FreshnessError):
    """Version ``got`` of ``role`` is older than version ``seen`` this client trusted before."""

    def __init__(self, service: str, role: str, got: int, seen: int, *, named_by: str = "") -> None:
        super().__init__(service, f"index version {got} ({role}{named_by}) is older than version {seen} seen on "
                                  f"{service}: a rollback, refused", role=role,
                         advice="the service (or a mirror or cache before it) answers an older index; ask again when "
                             "it answers the current one")
        self.got = got
        self.seen = seen


_RESIGN = {"root": "its operator renews the root (superfluid-manifest rotate-root)",
           "timestamp": "its operator re-signs it (superfluid-manifest refresh-timestamp, a cron job)",
           "snapshot": "its operator exports the index again (superfluid-manifest export --tuf-keys)",
           "targets": "its operator exports the index again (superfluid-manifest export --tuf-keys)"}


class FreezeRefused(FreshnessError):
    """``role``'s metadata expired at ``expires``: nobody re-signs the index the service answers."""

    def __init__(self, service: str, role: str, expires: str, now: str) -> None:
        super().__init__(service, f"{role} expired at {expires} (now {now}): {service} answers an index that is no "
                                  "longer re-signed (an indefinite freeze), refused", role=role,
                         advice=_RESIGN.get(role, _RESIGN["timestamp"]))
        self.expires = expires


class UntrustedSigner(FreshnessError):
    """Metadata not signed by the threshold of the keys trusted for it."""


class MixAndMatch(FreshnessError):
    """Metadata or an answer of another index version than the one the newer metadata names."""


class EndlessData(FreshnessError):
    """More bytes than the metadata allows (``limit``)."""

    def __init__(self, service: str, message: str, *, limit: int, role: str | None = None) -> None:
        super().__init__(service, message, role=role)
        self.limit = limit


class AnswerMismatch(FreshnessError):
    """An answer whose bytes are not the ones its metadata states (tampered on the way or at rest)."""


class NoFreshness(FreshnessError):
    """The service publishes no TUF metadata: how fresh its answers are cannot be checked."""


class NotListed(SuperfluidError):
    """The service's signed index lists no answer at ``path``. A static export (a ``file://``
    service: a folder) holds no other answer, checked or not: only a running service computes one
    for any value, so only it is told to be asked unchecked."""

    def __init__(self, service: str, path: str) -> None:
        static = service.lower().startswith("file:")
        super().__init__(f"{service} lists no signed answer at {path}: its index holds answers only for the values "
                         "its releases name",
                         advice="ask for a value a release names" + (
                             "; a static export holds no other answer (a running manifest service computes one)"
                             if static else ", or ask the service unchecked with --insecure-no-freshness"))
        self.service = service
        self.path = path


class NoTrustRoot(UsageError):
    """No TUF root to start trusting the service from (nothing was fetched)."""
