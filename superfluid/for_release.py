"""``--for FILE|URL|VERSION``: plan for the superfluid release that will run the engine."""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from superfluid.installer.errors import DownloadError
from superfluid.installer.settings import MIRROR_VARIABLE, Settings
from superfluid.installer.sources.choose import source_for
from superfluid.installer.trust.manifest import fetch_answer
from superfluid.installer.trust.refusals import NotListed
from superfluid.installer.trust.service import service_base
from superfluid.manifest.compat import parse
from superfluid.manifest.keys import trusted_keys
from superfluid.manifest.routes import ReleaseList, ReleaseOne
from superfluid.manifest.verdict import judge_signature
from superfluid.paths import flag_path
from superfluid.release_document import read_release
from superfluid.release_flags import FOR_VARIABLE, ForFlags
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError, UsageError
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.planning import ForRelease
from superfluid.trust_flags import trust_from

if TYPE_CHECKING:

    from superfluid.installer.trust.manifest import Trust

__all__ = ["release_for", "check_paths", "RELEASES_REPO", "NoSuchRelease"]

#: where the superfluid releases are published (``SUPERFLUID_RELEASES_REPO`` overrides)
RELEASES_REPO = "superfluid/superfluid-toolchain"
_MAX_BYTES = 4 << 20


#: what a superfluid version looks like (0.9.0, v0.9.0, 1.0.0rc1): a digit first, no spaces
_VERSION = re.compile(r"v?[0-9][0-9A-Za-z.+_-]*")


def _is_version(value: str) -> bool:
    return "://" not in value and not os.path.exists(value) and not value.endswith(".json") and "/" not in value


def _for_release(doc: Mapping[str, Any], body: bytes, where: str) -> ForRelease:
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
    verdict = judge_signature(body, signature, trusted_keys(home, keys), where=where,
                              signature_where=f"{where}.minisig", require=require_signature)
    _warn_unsigned(verdict.signature, where)
    return _for_release(parse(body, where), body, where)


def _warn_unsigned(signature: str, where: str) -> None:
    if signature == "unsigned":
        sys.stderr.write(f"superfluid: warning: {where} is unsigned: planning for it unverified "
                         "(--require-signature refuses it)\n")


class NoSuchRelease(SuperfluidError):
    """``--for VERSION``: the manifest service has no verified release of that version (exit 1)."""


def _reason_in(body: bytes) -> str | None:
    """The service's own words in a 404's body (``{"error": "release 0.2.1 was rejected: ..."}``)."""
    try:
        error = loads(body, max_bytes=_MAX_BYTES)["error"]
    except (UntrustedJson, TypeError, KeyError):
        return None
    return error if isinstance(error, str) and error else None


def _reason_listed(base: str, version: str, trust: Trust) -> str | None:
    """Why the service has no release ``version``, from its release list (``v1/releases.json``: a
    static export answers no 404 body, and a signed index lists no answer for a rejected release)."""
    try:
        route = ReleaseList.path.lstrip("/")
        listed = loads(fetch_answer(base, route, trust, max_bytes=_MAX_BYTES).body, max_bytes=_MAX_BYTES)
        rejected = [r for r in listed["rejected"] if isinstance(r, dict) and r.get("version") == version]
        verified = [str(r.get("version")) for r in listed["releases"] if isinstance(r, dict)]
    except (SuperfluidError, UntrustedJson, TypeError, KeyError):
        return None
    if rejected:
        return f"release {version} was rejected: {rejected[0].get('reason')}"
    return f"no verified release {version} (verified: {', '.join(verified) or 'none'})"


def _no_release(base: str, version: str, trust: Trust, body: bytes | None, cause: SuperfluidError) -> SuperfluidError:
    reason = (_reason_in(body) if body is not None else None) or _reason_listed(base, version, trust)
    if reason is None:
        return cause
    return NoSuchRelease(f"--for {version}: {base}: {reason}",
                         advice="name a release the service verified, or the release's compat.json with --for FILE|URL")


def _from_service(url: str, version: str, trust: Trust, **verify: Any) -> ForRelease:
    """The release's document and signature as the manifest service (or a static export: a folder,
    a ``file://`` URL) answers them, fetched fresh through its TUF metadata
    (``installer.manifest_trust``; unchecked with ``--insecure-no-freshness``).

    Raises:
        NoSuchRelease: the service has no such release (its reason: rejected and why, or the ones it has).
        DownloadError: the service cannot be reached.
        FreshnessError, NotListed, NoTrustRoot: its answer is refused.
        BadFile: the answer is not the service's shape.
    """
    base = service_base(url, "SUPERFLUID_MANIFEST_URL")
    route = ReleaseOne(version).path.lstrip("/")  # served by the service and by a static export
    where = f"{base}{route}"
    try:
        got = fetch_answer(base, route, trust, max_bytes=_MAX_BYTES, accept=(404,))
    except NotListed as e:  # a signed index lists no answer for a release it does not have
        raise _no_release(base, version, trust, None, e) from None
    except DownloadError as e:
        if e.status != 404:
            raise
        raise _no_release(base, version, trust, None, e) from None
    if got.status == 404:
        raise _no_release(base, version, trust, got.body,
                          NoSuchRelease(f"--for {version}: {where}: not found (HTTP 404)")) from None
    body = got.body
    try:
        answer = loads(body, max_bytes=_MAX_BYTES)
        document = answer["document"].encode("utf-8")
        signature = answer.get("signature")
    except (UntrustedJson, KeyError, TypeError, AttributeError) as e:
        reason = e.detail if isinstance(e, UntrustedJson) else e
        raise BadFile(where, f"is not the manifest service's answer for a release ({reason})") from None
    return _verified(document, signature.encode("utf-8") if isinstance(signature, str) else None, where, **verify)


def _from_github(version: str, environ: Mapping[str, str], settings: Settings, **verify: Any) -> ForRelease:
    """The release ``v<version>``'s compat document and its signature from the superfluid releases.

    Raises:
        ReleaseNotFound: no such release; NotInstallable-like BadFile: it carries no compat.json.
    """
    repo = environ.get("SUPERFLUID_RELEASES_REPO") or RELEASES_REPO
    # read online, from SUPERFLUID_MIRROR if it names one (never --mirror: the runtimes' mirror)
    source = source_for(replace(settings, mirror=settings.mirror_variable, mirror_named_by=MIRROR_VARIABLE,
                                offline=False))
    try:
        release = source.release(repo, f"v{version.removeprefix('v')}")
        names = {a.name: a for a in release.assets}
        docs = sorted(n for n in names if n.endswith(".compat.json"))
        if not docs:
            raise BadFile(f"{repo} {release.tag}", "publishes no .compat.json",
                          advice="name the document with --for FILE|URL")
        doc = names[docs[-1]]  # the wheel's and the sdist's describe the same release
        body = source.read(doc, max_bytes=_MAX_BYTES)
        sig = names.get(doc.name + ".minisig")
        signature = source.read(sig, max_bytes=64 << 10) if sig is not None else None
        return _verified(body, signature, doc.url, **verify)
    finally:
        source.close()


def check_paths(flags: ForFlags, value: str) -> None:
    """Each path the flags name, judged as every flag's path is (``paths.flag_path``): ``--key`` files,
    ``--trust-root``, and ``--for`` (``value``) when it names a local document rather than a URL or a
    version. A command that reads the home before it plans (``runtime update``) calls it first.

    Raises:
        UsageError: one is missing, a directory, a FIFO, a device or unreadable (exit 2, naming it).
    """
    for key in flags.keys:
        flag_path(key, "--key", "public key file")
    if flags.trust_root:
        flag_path(flags.trust_root, "--trust-root", "TUF root file")
    if flags.value and "://" not in value and not _is_version(value):
        flag_path(value, "--for", "compat document file")


def release_for(flags: ForFlags, settings: Settings, environ: Mapping[str, str]) -> ForRelease | None:
    """The release ``--for`` (else ``SUPERFLUID_FOR``) names, read and verified as its ``flags`` say;
    None for neither.

    Raises:
        UsageError: an empty value; a path given (``--for FILE``, ``--key``, ``--trust-root``) that is
            missing or not a file, naming it (exit 2, before anything is read).
        BadFile, SignatureError, TarballMismatch, DownloadError, ReleaseNotFound: as reading it.
    """
    value = flags.value or environ.get(FOR_VARIABLE) or None
    if value is None:
        return None
    value = value.strip()
    if not value:
        raise UsageError("--for needs a compat.json file, a URL or a superfluid version")
    check_paths(flags, value)
    keys, require = list(flags.keys), flags.require_signature
    verify: dict[str, Any] = {"keys": keys, "home": settings.home, "require_signature": require}
    if _is_version(value) and not _VERSION.fullmatch(value):
        raise UsageError(f"--for {value}: not a compat.json file, a URL or a superfluid version (e.g. 0.9.0): "
                         "name an existing file, an https:// URL or a release's version")
    if not _is_version(value):
        doc, verdict, digest = read_release(value, keys=keys, home=settings.home, require_signature=require)
        _warn_unsigned(verdict.signature, value)
        named = _for_release(doc, b"", value)
        return replace(named, compat_sha256=digest)
    service = environ.get("SUPERFLUID_MANIFEST_URL")
    if service:
        return _from_service(service, value, trust_from(flags.trust_root, flags.insecure, settings), **verify)
    return _from_github(value, environ, settings, **verify)
