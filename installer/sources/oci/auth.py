"""Registry credentials as docker and oras users keep them, and the challenges of registries."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from superfluid.runtime.errors import BadFile

__all__ = ["Login", "Challenge", "auth_files", "login_for", "parse_challenge", "token_url", "parse_token"]

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


def auth_files(environ: Mapping[str, str]) -> list[Path]:
    """The files a login is looked up in, in order (see the module doc)."""
    named = environ.get("REGISTRY_AUTH_FILE") or ""
    if named:
        return [Path(named).expanduser()]
    config = environ.get("DOCKER_CONFIG") or ""
    if config:
        return [Path(config).expanduser() / "config.json"]
    home = environ.get("HOME") or os.path.expanduser("~")
    return [Path(home) / ".docker" / "config.json"]


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
                          fix="log in again (`docker login`), or write the entry anew")
        return Login(user, secret, where)
    name, password = entry.get("username"), entry.get("password")
    if isinstance(name, str) and isinstance(password, str) and name:
        return Login(name, password, where)
    return None


def login_for(host: str, repository: str, environ: Mapping[str, str]) -> Login | None:
    """The login for ``host`` (``name[:port]``) and ``repository`` in the first auth file there is,
    or None.

    Raises:
        BadFile: that file is not JSON, its ``auths`` is not an object, or the entry that matches is
            broken (never quoting a secret).
    """
    from superfluid.runtime.jsonread import UntrustedJson, loads, read_bytes

    for path in auth_files(environ):
        where = str(path)
        try:
            doc = loads(read_bytes(path, max_bytes=_AUTH_MAX_BYTES, follow=True), max_bytes=_AUTH_MAX_BYTES)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise BadFile(where, f"cannot be read ({e.strerror or e})",
                          fix="make it readable, or point REGISTRY_AUTH_FILE at another file") from None
        except UntrustedJson as e:
            raise BadFile(where, f"is not a JSON auth file ({e.fault})",
                          fix="repair it, or point REGISTRY_AUTH_FILE at another file") from None
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
    from superfluid.runtime.jsonread import UntrustedJson, loads

    try:
        doc = loads(body, max_bytes=_AUTH_MAX_BYTES)
    except UntrustedJson as e:
        raise BadFile(where, f"is not a token answer ({e.fault})") from None
    token = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
    if not isinstance(token, str) or not token or any(c in token for c in "\r\n"):
        raise BadFile(where, "answered no token", json_path="$.token")
    return token
