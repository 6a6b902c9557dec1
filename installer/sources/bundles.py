"""Where an asset's Sigstore bundles are found, read within bounds and never verified here.

See docs/install.md, "Provenance".
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from superfluid.installer.errors import DownloadError, OfflineMissing, ProvenanceRefused
from superfluid.installer.sources.release import Asset
from superfluid.runtime.kernel.jsonread import NotRegularFile, UntrustedJson, loads, read_bytes

# A source that knows where its assets' bundles sit implements ``Attested`` (GitHub's attestations API for
# the asset's digest, ``<asset>.sigstore.json`` beside the asset in a mirror, a registry's referrers of the
# asset's artifact); ``installer/trust/proving.py`` asks it and has the bundles verified. Nothing here
# imports sigstore: an install whose assets have no bundle never loads the verifier.
__all__ = ["BUNDLE_MAX", "BUNDLE_DEPTH", "BUNDLES_EXAMINED", "ANSWER_MAX", "SUFFIX", "BUNDLE_TYPE", "Found",
           "Bundles", "Attested", "attestations", "bundle_file", "bundle_bytes", "too_large",
           "unless_absent"]

BUNDLE_MAX = 10 << 20  # bytes of a bundle (GitHub's are about 10 KiB; a statement's predicate is in it)
BUNDLE_DEPTH = 16  # nesting of a bundle's JSON (a v0.3 bundle nests 6 deep; its statement is base64 in it)
#: bundles of one answer examined: GitHub lists an asset's attestations of every predicate (provenance,
#: an SBOM...), a handful; an answer listing more is cut to these, and the cut is said
BUNDLES_EXAMINED = 8
#: bytes of an attestations answer: as many bundles as are examined, each within its cap
ANSWER_MAX = BUNDLE_MAX * 4
#: the bundle beside an asset in a mirror: ``<asset>.sigstore.json``, as ``gh attestation download`` names it
SUFFIX = ".sigstore.json"
#: a bundle's media type, and the ``artifactType`` of its manifest as a registry's referrer of an asset
BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"


@dataclass(frozen=True, slots=True)
class Found:
    """One bundle's bytes, and where it was found (a URL or a path, for messages and the receipt)."""

    data: bytes
    where: str


@dataclass(frozen=True, slots=True)
class Bundles:
    """What a source holds for one asset: the bundles to examine, how many it listed (more than
    ``found`` when an answer was cut to ``BUNDLES_EXAMINED``), and where it was asked."""

    found: tuple[Found, ...]
    where: str
    listed: int = 0

    @property
    def cut(self) -> bool:
        return self.listed > len(self.found)


@runtime_checkable
class Attested(Protocol):
    """A lister that knows where its assets' bundles are (``GitHubClient``, ``Mirror``, ``OciListing``)."""

    def bundles(self, repo: str, asset: Asset, sha256: str) -> Bundles:
        """The bundles of ``asset`` of ``repo``, whose bytes are ``sha256``: none when it has none.

        Raises:
            ProvenanceRefused: what is there is not a bundle to read (too large, a link, a FIFO, an
                answer that is not one): refused, never taken for "none".
            DownloadError: asking failed (as any request of the source).
        """


_T = TypeVar("_T")


def unless_absent(ask: Callable[[], _T]) -> _T | None:
    """What ``ask`` answered, or None when the source holds nothing there (404, or offline with none
    cached): an asset with no bundle. Any other fault is raised."""
    try:
        return ask()
    except OfflineMissing:
        return None
    except DownloadError as e:
        if e.status == 404:
            return None
        raise


def _refused(where: str, fault: str) -> ProvenanceRefused:
    return ProvenanceRefused(where, "bundle", fault)


def attestations(body: bytes, where: str) -> Bundles:
    """The bundles of a GitHub attestations answer (``{"attestations": [{"bundle": {...}}, ...]}``), the
    first ``BUNDLES_EXAMINED`` of them, each as its own JSON bytes.

    Raises:
        ProvenanceRefused: not such an answer (not JSON within ``ANSWER_MAX`` and the depth cap, no list).
    """
    try:
        doc = loads(body, max_bytes=ANSWER_MAX, max_depth=BUNDLE_DEPTH + 3)
    except UntrustedJson as e:
        raise _refused(where, f"is not an attestations answer: it {e.fault}") from None
    listed = doc.get("attestations") if isinstance(doc, dict) else None
    if not isinstance(listed, list):
        raise _refused(where, "is not an attestations answer (no list of attestations)")
    found = []
    for i, item in enumerate(listed[:BUNDLES_EXAMINED]):
        bundle: Any = item.get("bundle") if isinstance(item, dict) else None
        if not isinstance(bundle, dict):
            raise _refused(where, f"lists an attestation without a bundle (the {_ordinal(i)})")
        found.append(Found(json.dumps(bundle, separators=(",", ":")).encode(), f"{where} (attestation {i + 1})"))
    return Bundles(tuple(found), where, len(listed))


def _ordinal(i: int) -> str:
    return {0: "first", 1: "second", 2: "third"}.get(i, f"{i + 1}th")


def too_large(where: str, size: int) -> ProvenanceRefused:
    """The refusal of a bundle of ``size`` bytes, more than ``BUNDLE_MAX``: never parsed."""
    return _refused(where, f"is larger than {BUNDLE_MAX} bytes (at least {size}), more than any Sigstore bundle")


def bundle_bytes(data: bytes, where: str) -> Bundles:
    """One bundle read whole (``<asset>.sigstore.json``, a registry's blob).

    Raises:
        ProvenanceRefused: more than ``BUNDLE_MAX`` bytes.
    """
    if len(data) > BUNDLE_MAX:
        raise too_large(where, len(data))
    return Bundles((Found(data, where),), where, 1)


def bundle_file(path: str) -> Bundles:
    """The bundle at ``path`` in a mirror folder, or none when nothing is there: a regular file of at
    most ``BUNDLE_MAX`` bytes, never through a link (a link may lead out of the folder) nor a FIFO.

    Raises:
        ProvenanceRefused: a link, a FIFO, a device, a directory, too large, or unreadable.
    """
    try:
        data = read_bytes(path, max_bytes=BUNDLE_MAX, follow=False)
    except FileNotFoundError:
        return Bundles((), path)
    except NotRegularFile as e:
        too_large = e.errno == errno.EFBIG
        raise _refused(path, f"cannot be read as a Sigstore bundle: it {e.strerror}"
                       + ("" if too_large else " (a bundle in a mirror folder is a regular file in it)")) from None
    except OSError as e:
        raise _refused(path, f"cannot be read as a Sigstore bundle ({e.strerror or e})") from None
    return Bundles((Found(data, path),), path, 1)
