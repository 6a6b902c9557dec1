"""The installer's network limits and settings: one frozen record with units, built once by the face."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["FetchConfig", "DEFAULT_GITHUB_API"]

DEFAULT_GITHUB_API = "https://api.github.com"


@dataclass(kw_only=True, frozen=True, slots=True)
class FetchConfig:
    """Named limits for listing and downloading, and the network settings a command line chose
    (``--plain-http``). Checked on construction.

    Raises:
        ValueError: a limit out of range (negative, zero where a positive number is needed).
    """

    retries: int = 4  # further attempts after the first, per request
    unresolved_retries: int = 1  # further attempts after a host name did not resolve (DNS)
    refused_retries: int = 1  # further attempts after a connection was refused (nothing listens)
    backoff_base: float = 0.5  # seconds; attempt n waits backoff_base * 2**n ...
    backoff_max: float = 20.0  # seconds; ... but never longer than this
    retry_after_max: float = 120.0  # seconds; a longer Retry-After or reset is reported, not waited
    connect_timeout: float = 30.0  # seconds to open a connection
    stall_timeout: float = 60.0  # seconds without a single byte before a transfer is a stall ...
    stall_min_bytes: int = 1024  # bytes; ... or with fewer than this many in any such window (a trickle)
    patience: float = 120.0  # seconds one request may go without a byte, over all its attempts and waits
    chunk_size: int = 1 << 20  # bytes read and hashed at a time
    max_redirects: int = 5  # hops per request
    listing_max_bytes: int = 16 << 20  # bytes of one listing page (JSON)
    listing_max_pages: int = 50  # pages followed through Link rel="next" (x100 releases each)
    listing_per_page: int = 100  # releases asked per page (GitHub's maximum)
    small_asset_max_bytes: int = 64 << 10  # bytes of a sidecar read whole (.sha256, ABI asset)
    max_download_bytes: int = 8 << 30  # bytes; the cap when a release declares no size
    parallel: int = 4  # assets of one plan downloaded at once (threads)
    rehash_cached: bool = True  # re-hash a cached blob before handing it out
    # flush a download to disk before it enters the cache: not needed while ``rehash_cached`` holds
    # (a blob a power cut tore fails its re-hash, is removed and fetched again); measured, it cost a
    # streamed install of 210 MB ~0.15 s whenever the disk was busy with other writes
    fsync: bool = False
    user_agent: str = "superfluid-toolchain"
    # speak plain http:// to every oci:// registry (--plain-http), not only to one on loopback
    oci_plain_http: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if value < 0:
                raise ValueError(f"FetchConfig.{f.name} must not be negative, got {value!r}")
        positive = (
            "chunk_size",
            "listing_max_bytes",
            "listing_max_pages",
            "listing_per_page",
            "small_asset_max_bytes",
            "max_download_bytes",
            "parallel",
            "stall_timeout",
            "connect_timeout",
            "patience",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"FetchConfig.{name} must be positive, got {getattr(self, name)!r}")
        if not 1 <= self.listing_per_page <= 100:
            raise ValueError(f"FetchConfig.listing_per_page must be 1..100, got {self.listing_per_page!r}")

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based): exponential, capped."""
        return float(min(self.backoff_max, self.backoff_base * (2**attempt)))
