"""The files a release carries beside each artifact, and how they are named and written.

See docs/release.md, "What a release carries".
"""

from __future__ import annotations

import hashlib
import os

from superfluid.installer.sources import bundles

__all__ = ["SHA256_SUFFIX", "COMPAT_SUFFIX", "SIGNATURE_SUFFIX", "PACK_SUFFIXES", "BUNDLE_SUFFIX", "ATTESTED_SUFFIXES",
           "file_sha256", "sha256_line"]

SHA256_SUFFIX = ".sha256"
COMPAT_SUFFIX = ".compat.json"
SIGNATURE_SUFFIX = ".minisig"
#: what ci/pack writes beside each artifact, by suffix
PACK_SUFFIXES = (SHA256_SUFFIX, COMPAT_SUFFIX, COMPAT_SUFFIX + SIGNATURE_SUFFIX)
#: a file's attestation beside it: the Sigstore bundle the release workflow's actions/attest-build-provenance
#: made for it, named as an install looks for it in a mirror (``<file>.sigstore.json``; docs/install.md, "Provenance")
BUNDLE_SUFFIX = bundles.SUFFIX
#: what the release workflow attests of each artifact, by suffix: the artifact and its compat document (the
#: ``.sha256`` and the ``.minisig`` are a digest and a signature of those)
ATTESTED_SUFFIXES = ("", COMPAT_SUFFIX)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The lower-case hex SHA-256 of the file at ``path``, read in chunks.

    Raises:
        OSError: it cannot be read.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_line(name: str, hexdigest: str) -> str:
    """The content of ``<name>.sha256``.

    >>> sha256_line("a.tar.gz", "0" * 64)
    '0000000000000000000000000000000000000000000000000000000000000000  a.tar.gz\\n'
    """
    if os.path.basename(name) != name or "\n" in name:
        raise ValueError(f"a .sha256 line names a file in the same directory, got {name!r}")
    return f"{hexdigest.lower()}  {name}\n"
