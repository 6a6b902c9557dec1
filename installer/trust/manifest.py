"""One answer of a compat manifest service, fetched fresh or refused.

See docs/manifest-service.md, "The client".
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from superfluid.installer.settings import MANIFEST_ROOT_VARIABLE
from superfluid.installer.sources.release_source import fetcher_for
from superfluid.installer.trust.refusals import NoTrustRoot
from superfluid.installer.trust.tuf_client import fetch_target
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import read_bytes
from superfluid.runtime.kernel.layout import linked_between, writable_home

__all__ = ["Trust", "Answer", "fetch_answer", "trust_dir", "trust_top", "newest_root", "kept_roots"]

_ROOT_MAX = 512000  # bytes of a root file (ngclient's root_max_length)
_ROOT_FILE = re.compile(r"^([1-9][0-9]{0,9})\.root\.json$")


@dataclass(frozen=True, slots=True)
class Trust:
    """How a command trusts a manifest service's answers, built once by the face."""

    home: str  # SUPERFLUID_HOME
    root: str | None = None  # the root file to start from (--trust-root, SUPERFLUID_MANIFEST_ROOT)
    insecure: bool = False  # --insecure-no-freshness


@dataclass(frozen=True, slots=True)
class Answer:
    """The service's answer: HTTP status, bytes, and the TUF versions it was checked with
    (``{"checked": false}`` when it was not)."""

    status: int
    body: bytes
    freshness: dict[str, Any] = field(default_factory=lambda: {"checked": False})


def trust_dir(home: str, service: str) -> str:
    """The trust folder of ``service`` under ``home`` (a pure path)."""
    parts = urlsplit(service)
    words = re.sub(r"[^A-Za-z0-9._]+", "-", f"{parts.hostname or parts.scheme}-{parts.port or ''}-{parts.path}")
    digest = hashlib.sha256(service.encode("utf-8")).hexdigest()[:12]
    return os.path.join(trust_top(home), f"{words.strip('-.')[:64]}-{digest}")


def trust_top(home: str) -> str:
    """``<home>/trust``: one folder per manifest service asked."""
    return os.path.join(home, "trust")


def newest_root(directory: str) -> str | None:
    """The newest root a service's trust folder keeps (``root_history/<N>.root.json`` of the highest
    N), or None: the root its next question starts from."""
    history = os.path.join(directory, "root_history")
    try:
        versions = [int(m[1]) for n in os.listdir(history) if (m := _ROOT_FILE.match(n))]
    except OSError:
        versions = []
    return os.path.join(history, f"{max(versions)}.root.json") if versions else None


def kept_roots(home: str) -> list[str]:
    """The newest root each service's trust folder under ``home`` keeps, by folder name (none when the
    home keeps no trust folder): what ``doctor`` reads the expiry of."""
    top = trust_top(home)
    try:
        folders = sorted(os.listdir(top)) if not os.path.islink(top) else []
    except OSError:
        folders = []
    found = (newest_root(os.path.join(top, name)) for name in folders)
    return [path for path in found if path is not None]


def _folder(home: str, service: str) -> str:
    """The trust folder, made (mode 0700) and never through a link in the home.

    Raises:
        HomeUnusable: the home cannot be written; BadFile: a link in the way.
    """

    writable_home(os.path.abspath(home))
    where = trust_dir(home, service)
    link = linked_between(home, where)
    if link is not None:
        raise BadFile(link, "is a symbolic link: the trust folder is never written through a link in the home",
                      advice="remove it, or point SUPERFLUID_HOME elsewhere")
    os.makedirs(where, mode=0o700, exist_ok=True)
    return where


def _anchor(trust: Trust, directory: str, service: str) -> tuple[bytes, str]:
    """The root to start from and where it was read.

    Raises:
        BadFile: the named root cannot be read; NoTrustRoot: there is none.
    """

    if trust.root:
        try:
            return read_bytes(trust.root, max_bytes=_ROOT_MAX, follow=True), trust.root
        except OSError as e:
            raise BadFile(trust.root, f"cannot be read as a TUF root ({e.strerror or e})") from None
    path = newest_root(directory)
    if path is not None:
        try:
            return read_bytes(path, max_bytes=_ROOT_MAX), path
        except OSError as e:
            raise BadFile(path, f"cannot be read ({e.strerror or e})") from None
    raise NoTrustRoot(f"no TUF root to trust {service} from (this superfluid ships none: there is no default manifest "
                      "service)",
                      advice=f"give --trust-root FILE, the service's metadata/1.root.json as its operator hands it "
                             f"out, or set {MANIFEST_ROOT_VARIABLE}; or ask without freshness checks with "
                             "--insecure-no-freshness (a rolled-back or frozen index is then accepted)")


def _unchecked(service: str, path: str, *, max_bytes: int, accept: tuple[int, ...]) -> Answer:
    sys.stderr.write(f"superfluid: warning: --insecure-no-freshness: the answers of {service} are not checked for "
                     "freshness (a rolled-back or frozen index is accepted)\n")
    url = service + path
    fetcher = fetcher_for(url, plain_http=True)  # the user named the service: plain http is theirs to choose
    try:
        response, body = fetcher.get_bytes(url, max_bytes=max_bytes, accept=accept,
                                           headers={"Accept": "application/json"})
    finally:
        fetcher.close()
    return Answer(response.status, body)


def fetch_answer(service: str, path: str, trust: Trust, *, max_bytes: int, accept: tuple[int, ...] = ()) -> Answer:
    """The answer at ``service`` (a base URL ending in ``/``) + ``path``: a TUF target verified fresh,
    or (``trust.insecure``) fetched unchecked, where a status in ``accept`` is an answer too.

    Raises:
        NoTrustRoot: no root to start from (nothing fetched).
        FreshnessError (its subclasses name the attack), NotListed: the answer is refused.
        DownloadError: the service could not be reached; BadFile: a root file.
    """
    path = path.lstrip("/")
    if trust.insecure:
        return _unchecked(service, path, max_bytes=max_bytes, accept=accept)
    anchor, where = _anchor(trust, trust_dir(trust.home, service), service)
    directory = _folder(trust.home, service)

    fetcher = fetcher_for(service, plain_http=True)
    try:
        body, freshness = fetch_target(service, path, anchor=anchor, anchor_where=where, directory=directory,
                                       fetcher=fetcher)
    finally:
        fetcher.close()
    if len(body) > max_bytes:
        raise BadFile(service + path, f"is larger than {max_bytes} bytes")
    return Answer(200, body, freshness)
