"""Registry credentials as docker and oras users keep them, the challenges of registries, and
``RegistryAuth``: a fetcher's requests to one registry with its challenges answered."""

from __future__ import annotations

import base64
import os
import re
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlencode, urlsplit

from superfluid.installer.errors import DownloadError
from superfluid.installer.sources.oci.ref import OciRef
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import Body, Credential, FetchResponse
from superfluid.installer.transport.urls import origin_of
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads, read_bytes

__all__ = [
    "Login",
    "Challenge",
    "RegistryAuth",
    "auth_files",
    "login_for",
    "missing_auth_file",
    "parse_challenge",
    "token_url",
    "parse_token",
    "once_or_retried",
]

T = TypeVar("T")

#: the most bytes of an auth file or a token answer read
_AUTH_MAX_BYTES = 1 << 20
_PARAM = re.compile(r'\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))\s*(?:,|$)')


@dataclass(frozen=True, slots=True)
class Login:
    """A user and a secret for one registry, and the file it came from (for messages)."""

    user: str
    secret: str = field(repr=False)
    source: str

    def basic(self) -> str:
        """The ``Authorization`` value of HTTP Basic."""
        return "Basic " + base64.b64encode(f"{self.user}:{self.secret}".encode()).decode("ascii")


def auth_files(*, named: str, docker_config: str, user_home: str) -> list[Path]:
    """The files a login is looked up in, in order (see the module doc), from ``REGISTRY_AUTH_FILE``
    (``named``), ``DOCKER_CONFIG`` and ``HOME`` as the face read them (empty: unset)."""
    if named:
        return [Path(named).expanduser()]
    if docker_config:
        return [Path(docker_config).expanduser() / "config.json"]
    return [Path(user_home or os.path.expanduser("~")) / ".docker" / "config.json"]


def missing_auth_file(files: Sequence[str], *, named: bool) -> str | None:
    """The file ``REGISTRY_AUTH_FILE`` names (``named``: ``files`` is that one) when it does not exist
    (a login is then looked up nowhere, which a registry's 401 says), else None."""
    return files[0] if named and files and not os.path.lexists(files[0]) else None


def _key(raw: str) -> str:
    """An ``auths`` key as ``host[:port][/namespace]``, lower-cased host."""
    text = raw.strip()
    if "://" in text:
        parts = urlsplit(text)
        text = parts.netloc + parts.path
    text = text.rstrip("/")
    if text.endswith("/v1") or text.endswith("/v2"):
        text = text[:-3]
    host, sep, rest = text.partition("/")
    return host.lower() + sep + rest


def _entry_login(entry: object, key: str, where: str) -> Login | None:
    if not isinstance(entry, dict):
        raise BadFile(where, "is not an object", json_path=f"$.auths[{key!r}]")
    if isinstance(entry.get("auth"), str) and entry["auth"]:
        try:
            user, sep, secret = base64.b64decode(entry["auth"], validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            sep = ""
        if not sep:
            raise BadFile(where, "is not base64 of user:password", json_path=f"$.auths[{key!r}].auth",
                          advice="log in again (docker login HOST), or write the entry anew")
        return Login(user, secret, where)
    name, password = entry.get("username"), entry.get("password")
    if isinstance(name, str) and isinstance(password, str) and name:
        return Login(name, password, where)
    return None


def login_for(host: str, repository: str, files: Sequence[str]) -> Login | None:
    """The login for ``host`` (``name[:port]``) and ``repository`` in the first of ``files`` (the auth
    files, ``auth_files``) there is, or None.

    Raises:
        BadFile: that file is not JSON, its ``auths`` is not an object, or the entry that matches is
            broken (never quoting a secret).
    """
    for where in files:
        path = Path(where)
        try:
            doc = loads(read_bytes(path, max_bytes=_AUTH_MAX_BYTES, follow=True), max_bytes=_AUTH_MAX_BYTES)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise BadFile(where, f"cannot be read ({e.strerror or e})",
                          advice="make it readable, or point REGISTRY_AUTH_FILE at another file") from None
        except UntrustedJson as e:
            raise BadFile(where, f"is not a JSON auth file ({e.fault})",
                          advice="repair it, or point REGISTRY_AUTH_FILE at another file") from None
        auths = doc.get("auths", {}) if isinstance(doc, dict) else None
        if not isinstance(auths, dict):
            raise BadFile(where, "has no auths object", json_path="$.auths")
        wanted = f"{host.lower()}/{repository}"
        matches = sorted(((k, _key(k)) for k in auths if isinstance(k, str)), key=lambda kv: -len(kv[1]))
        for raw, key in matches:
            if key == host.lower() or wanted == key or wanted.startswith(key + "/"):
                login = _entry_login(auths[raw], raw, where)
                if login is not None:
                    return login
        return None
    return None


@dataclass(frozen=True, slots=True)
class Challenge:
    """A ``WWW-Authenticate`` challenge: ``scheme`` (lower case: ``basic``, ``bearer``) and its
    parameters (``realm``, ``service``, ``scope``)."""

    scheme: str
    params: Mapping[str, str]


def parse_challenge(header: str | None) -> Challenge | None:
    """The first challenge of a ``WWW-Authenticate`` header, or None when there is none to answer.

    >>> parse_challenge('Bearer realm="https://auth.example/token",service="reg",scope="repository:a:pull"').params
    {'realm': 'https://auth.example/token', 'service': 'reg', 'scope': 'repository:a:pull'}
    """
    if not header or not header.strip():
        return None
    scheme, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        m = _PARAM.match(rest, pos)
        if m is None or m.end() == pos:
            break
        name = m.group(1).lower()
        if name in params:  # a second challenge begins ("..., Basic realm=..."): the first is enough
            break
        params[name] = m.group(2).replace('\\"', '"') if m.group(2) is not None else m.group(3)
        pos = m.end()
    return Challenge(scheme.lower(), params)


def token_url(challenge: Challenge, scope: str) -> str:
    """The realm's URL asking a token for ``scope`` (the challenge's own scope when it names one,
    ours added when it differs: a push needs ``pull,push``).

    Raises:
        ValueError: the challenge names no realm.
    """
    realm = challenge.params.get("realm") or ""
    if not realm:
        raise ValueError("the registry's Bearer challenge names no realm")
    query: list[tuple[str, str]] = []
    if challenge.params.get("service"):
        query.append(("service", challenge.params["service"]))
    scopes = [s for s in (challenge.params.get("scope") or "").split(" ") if s]
    if scope not in scopes:
        scopes.append(scope)
    query += [("scope", s) for s in scopes]
    return realm + ("&" if "?" in realm else "?") + urlencode(query)


def parse_token(body: bytes, where: str) -> str:
    """The token of a token service's answer (``token``, or OAuth2's ``access_token``).

    Raises:
        BadFile: not JSON, or no token in it.
    """
    try:
        doc = loads(body, max_bytes=_AUTH_MAX_BYTES)
    except UntrustedJson as e:
        raise BadFile(where, f"is not a token answer ({e.fault})") from None
    token = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
    if not isinstance(token, str) or not token or any(c in token for c in "\r\n"):
        raise BadFile(where, "answered no token", json_path="$.token")
    return token


def once_or_retried(fetcher: Fetcher, url: str, op: Callable[[int], T]) -> T:
    """``fetcher.retry(url, op)``; or one attempt when this thread is inside a retry already (a
    challenge or an index read while a download is tried): the outer loop retries it, the two never
    multiply."""
    if fetcher.retrying():
        return op(0)
    return fetcher.retry(url, op)


class RegistryAuth:
    """Requests to one registry through ``fetcher``, a ``401`` answered from its challenge: Basic
    with the login, or a token asked of the Bearer challenge's realm (with the login; only over
    HTTPS or to loopback: the fetcher's scheme rule) for the repository's scope. A wrapper around
    the fetcher: every request, the token's too, keeps the fetcher's rules (redirects with the
    credential at the registry's origin only, caps, the stall rule); the credential is kept for
    the requests after.

    Args:
        fetcher: the fetcher that speaks HTTP to the registry.
        ref: the registry and repository.
        login: the login for the registry (``login_for``), or None (anonymous).
        push: ask tokens for ``pull,push`` (``mirror push``) rather than ``pull``.
    """

    def __init__(self, fetcher: Fetcher, ref: OciRef, login: Login | None, *, push: bool = False) -> None:
        self.fetcher = fetcher
        self.ref = ref
        self.login = login
        self.scope = f"repository:{ref.repository}:{'pull,push' if push else 'pull'}"
        self._origin = origin_of(ref.api)
        self._auth: Credential | None = None
        self._lock = threading.Lock()
        #: with no login: the auth file the environment names that does not exist (``missing_auth_file``)
        self.missing_file: str | None = None

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        body: Body | None = None,
        credential: Credential | None = None,
        max_bytes: int | None = None,
        accept: Collection[int] = (),
    ) -> FetchResponse:
        """``fetcher.request``, a ``401`` of the registry answered once (an ``Upload`` body is sent
        again whole); ``credential`` given: sent as it is, no challenge answered.

        Raises:
            DownloadError: as ``Fetcher.request``; a 401 not cured by the login names the fix.
        """
        wanted = frozenset(accept)
        for answered in (False, True):
            auth = credential or self._auth
            r = self.fetcher.request(method, url, headers, body=body, credential=auth, max_bytes=max_bytes,
                                     accept=wanted | {401})
            if r.status != 401 or 401 in wanted:
                return r
            challenge, at = r.headers.get("www-authenticate"), r.url
            r.close()
            if origin_of(at) != self._origin:
                raise DownloadError(at, f"HTTP 401 unauthorized (a redirect of {url})", status=401)
            if answered or credential is not None or not self._answer(challenge, auth):
                raise self.unauthorized(url)
        raise AssertionError("unreachable")

    def _answer(self, header: str | None, failed: Credential | None) -> bool:
        """Answer a challenge: whether a new ``Authorization`` is there to try."""
        challenge = parse_challenge(header)
        if challenge is None:
            return False
        with self._lock:
            if self._auth is not failed:  # another thread answered it meanwhile
                return self._auth is not None
            if challenge.scheme == "basic":
                if self.login is None or (failed is not None and failed.authorization == self.login.basic()):
                    return False
                self._auth = Credential(self._origin, self.login.basic())
                return True
            if challenge.scheme == "bearer":
                self._auth = Credential(self._origin, f"Bearer {self._token(challenge)}")
                return True
        return False

    def _token(self, challenge: Challenge) -> str:
        """A token from the challenge's realm, asked with the login when there is one."""
        try:
            url = token_url(challenge, self.scope)
        except ValueError as e:
            raise DownloadError(self.ref.api, str(e)) from None
        login = Credential(origin_of(url), self.login.basic()) if self.login is not None else None

        def attempt(_: int) -> bytes:
            with self.fetcher.open(url, {"Accept": "application/json"}, credential=login,
                                   max_bytes=_AUTH_MAX_BYTES, accept=(401, 403)) as r:
                if r.status in (401, 403):
                    raise self.unauthorized(url.split("?", 1)[0], token=True)
                return r.read()

        return parse_token(once_or_retried(self.fetcher, url, attempt), f"the token service {url.split('?', 1)[0]}")

    def unauthorized(self, url: str, *, token: bool = False) -> DownloadError:
        """The 401 the login did not cure, with its fix."""
        host = self.ref.host
        what = "its token service refused" if token else f"{self.ref.describe()} refused"
        if self.login is None and self.missing_file is not None:
            return DownloadError(url, f"HTTP 401 unauthorized: {self.ref.describe()} asks for a login, and "
                                 f"REGISTRY_AUTH_FILE names {self.missing_file}, which does not exist", status=401,
                                 advice="point REGISTRY_AUTH_FILE at an existing auth file (as docker login or "
                                        "podman login writes it), or unset it to read $DOCKER_CONFIG/config.json or "
                                        "~/.docker/config.json")
        if self.login is None:
            return DownloadError(url, f"HTTP 401 unauthorized: {self.ref.describe()} asks for a login, and there "
                                 f"is none for {host}", status=401,
                                 advice=f"log in to it (docker login {host}), or add an auths entry for {host} to "
                                        "REGISTRY_AUTH_FILE")
        return DownloadError(url, f"HTTP 401 unauthorized: {what} the login of {self.login.user!r} from "
                             f"{self.login.source}", status=401, advice=f"log in again (docker login {host})")
