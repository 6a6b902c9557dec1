"""``--for FILE|URL|VERSION``: plan for the superfluid release that will run the engine."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from superfluid.runtime.errors import BadFile, UsageError

if TYPE_CHECKING:  # the parser of every command adds this module's flags: it imports little
    import argparse

    from superfluid.installer.manifest_trust import Trust
    from superfluid.runtime.planning import ForRelease

__all__ = ["add_flags", "release_for", "RELEASES_REPO"]

#: where the superfluid releases are published (``SUPERFLUID_RELEASES_REPO`` overrides)
RELEASES_REPO = "superfluid/superfluid-toolchain"
_MAX_BYTES = 4 << 20


def add_flags(p: argparse.ArgumentParser) -> None:
    """``--for``, ``--key`` and ``--require-signature`` on a command that plans."""
    p.add_argument("--for", dest="for_", metavar="FILE|URL|VERSION",
                   help="plan for another superfluid release: its compat.json, or its version (or SUPERFLUID_FOR)")
    if not any(a.dest == "key" for a in p._actions):
        p.add_argument("--key", action="append", metavar="FILE",
                       help="also trust this minisign public key for --for (repeatable)")
    if not any(a.dest == "require_signature" for a in p._actions):
        p.add_argument("--require-signature", action="store_true", help="refuse a --for document with no signature")
    from superfluid.commands.trust_flags import add_flags as add_trust_flags

    add_trust_flags(p)  # --for VERSION asks the manifest service


def _is_version(value: str) -> bool:
    return "://" not in value and not os.path.exists(value) and not value.endswith(".json") and "/" not in value


def _for_release(doc: Mapping[str, Any], body: bytes, where: str) -> ForRelease:
    import hashlib

    from superfluid.runtime.planning import ForRelease

    release = doc.get("release")
    if not isinstance(release, Mapping):
        release = {}
    runtimes = doc.get("runtimes")
    if not isinstance(runtimes, Mapping):
        raise BadFile(where, "has no runtimes", json_path="$.runtimes")
    return ForRelease(str(release.get("name") or "superfluid"), str(release.get("version") or "?"),
                      hashlib.sha256(body).hexdigest(), {str(k): v for k, v in runtimes.items()})


def _verified(body: bytes, signature: bytes | None, where: str, *, keys: list[str], home: str,
              require_signature: bool) -> ForRelease:
    from superfluid.manifest.compat import parse
    from superfluid.manifest.keys import trusted_keys
    from superfluid.manifest.verdict import judge_signature

    verdict = judge_signature(body, signature, trusted_keys(home, keys), where=where,
                              signature_where=f"{where}.minisig", require=require_signature)
    _warn_unsigned(verdict.signature, where)
    return _for_release(parse(body, where), body, where)


def _warn_unsigned(signature: str, where: str) -> None:
    if signature == "unsigned":
        import sys

        sys.stderr.write(f"superfluid: warning: {where} is unsigned: planning for it unverified "
                         "(--require-signature refuses it)\n")


def _from_service(url: str, version: str, trust: Trust, **verify: Any) -> ForRelease:
    """The release's document and signature as the manifest service answers them, fetched fresh
    through its TUF metadata (``installer.manifest_trust``; unchecked with ``--insecure-no-freshness``).

    Raises:
        ReleaseNotFound-like DownloadError: the service has no such release (404) or fails.
        FreshnessError, NotListed, NoTrustRoot: its answer is refused.
        BadFile: the answer is not the service's shape.
    """
    from superfluid.installer.manifest_trust import fetch_answer
    from superfluid.runtime.jsonread import UntrustedJson, loads

    where = f"{url.rstrip('/')}/v1/releases/{version}.json"  # served by the service and by a static export
    body = fetch_answer(url.rstrip("/") + "/", f"v1/releases/{version}.json", trust, max_bytes=_MAX_BYTES).body
    try:
        answer = loads(body, max_bytes=_MAX_BYTES)
        document = answer["document"].encode("utf-8")
        signature = answer.get("signature")
    except (UntrustedJson, KeyError, TypeError, AttributeError) as e:
        reason = e.detail if isinstance(e, UntrustedJson) else e
        raise BadFile(where, f"is not the manifest service's answer for a release ({reason})") from None
    return _verified(document, signature.encode("utf-8") if isinstance(signature, str) else None, where, **verify)


def _from_github(version: str, environ: Mapping[str, str], **verify: Any) -> ForRelease:
    """The release ``v<version>``'s compat document and its signature from the superfluid releases.

    Raises:
        ReleaseNotFound: no such release; NotInstallable-like BadFile: it carries no compat.json.
    """
    from superfluid.installer.sources import source_for

    repo = environ.get("SUPERFLUID_RELEASES_REPO") or RELEASES_REPO
    source = source_for(mirror=None, offline=False, environ=environ)
    try:
        release = source.release(repo, f"v{version.removeprefix('v')}")
        names = {a.name: a for a in release.assets}
        docs = sorted(n for n in names if n.endswith(".compat.json"))
        if not docs:
            raise BadFile(f"{repo} {release.tag}", "publishes no .compat.json",
                          fix="name the document with --for FILE|URL")
        doc = names[docs[-1]]  # the wheel's and the sdist's describe the same release
        body = source.read(doc, max_bytes=_MAX_BYTES)
        sig = names.get(doc.name + ".minisig")
        signature = source.read(sig, max_bytes=64 << 10) if sig is not None else None
        return _verified(body, signature, doc.url, **verify)
    finally:
        source.close()


def release_for(args: argparse.Namespace, environ: Mapping[str, str]) -> ForRelease | None:
    """The release ``--for`` (else ``SUPERFLUID_FOR``) names, read and verified; None for neither.

    Raises:
        UsageError: an empty value.
        BadFile, SignatureError, TarballMismatch, DownloadError, ReleaseNotFound: as reading it.
    """
    from superfluid.runtime.home import home

    value = getattr(args, "for_", None) or environ.get("SUPERFLUID_FOR") or None
    if value is None:
        return None
    value = value.strip()
    if not value:
        raise UsageError("--for needs a compat.json file, a URL or a superfluid version")
    keys = list(getattr(args, "key", None) or [])
    require = bool(getattr(args, "require_signature", False))
    verify: dict[str, Any] = {"keys": keys, "home": home(environ), "require_signature": require}
    if not _is_version(value):
        from dataclasses import replace

        from superfluid.commands.compat import read_release

        doc, verdict, digest = read_release(value, keys=keys, home=home(environ), require_signature=require)
        _warn_unsigned(verdict.signature, value)
        named = _for_release(doc, b"", value)
        return replace(named, compat_sha256=digest)
    service = environ.get("SUPERFLUID_MANIFEST_URL")
    if service:
        from superfluid.commands.trust_flags import trust_from

        return _from_service(service, value, trust_from(args, environ), **verify)
    return _from_github(value, environ, **verify)
