"""The network seam for one OCI registry: the fetcher's rules, with a registry's addressing and auth."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, VerificationError
from superfluid.installer.sources.oci.auth import Login, parse_challenge, parse_token, token_url
from superfluid.installer.sources.oci.ref import (
    MANIFEST_MAX_BYTES,
    MANIFEST_TYPE,
    Layer,
    OciRef,
    index_tag,
    parse_manifest,
)
from superfluid.installer.transport.fetcher import Credential, FetchResponse, Headers, RequestsFetcher, origin_of

__all__ = ["OciFetcher", "Reply", "fetcher_for_ref"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TOKEN_MAX_BYTES = 1 << 20
#: the bytes of an error answer kept for its message
_ERROR_BODY_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Reply:
    """A registry's answer to a ``HEAD``, ``POST`` or ``PUT``: status, headers, where, and the
    start of its body (for an error's words)."""

    status: int
    headers: Headers
    url: str
    body: bytes = b""


def _no_auth(r: Any) -> Any:
    """Tells requests to add no credentials of its own (``.netrc``, URL userinfo)."""
    return r


def _oci_detail(body: bytes) -> str:
    """``CODE: message`` of a distribution error answer (``{"errors": [{"code", "message"}]}``)."""
    from superfluid.runtime.jsonread import UntrustedJson, loads

    try:
        doc = loads(body, max_bytes=_ERROR_BODY_BYTES * 4)
    except (UntrustedJson, ValueError):
        return ""
    errors = doc.get("errors") if isinstance(doc, dict) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    words = [str(first.get(k))[:200] for k in ("code", "message") if isinstance(first.get(k), str)]
    return ": ".join(words)


class _Body:
    """A blob's bytes for an upload, read in chunks and told to the progress bar."""

    def __init__(self, source: bytes | Path, size: int, progress: Any, name: str) -> None:
        self._file = open(source, "rb") if isinstance(source, Path) else None  # noqa: SIM115 - closed by close()
        self._data = source if isinstance(source, bytes) else b""
        self._pos = 0
        self._size = size
        self._progress, self._name = progress, name
        if progress is not None:
            progress.start(name, size)

    def __len__(self) -> int:
        return self._size - self._pos

    def read(self, n: int = -1) -> bytes:
        n = self._size - self._pos if n is None or n < 0 else n
        chunk = self._file.read(n) if self._file is not None else self._data[self._pos:self._pos + n]
        self._pos += len(chunk)
        if chunk and self._progress is not None:
            self._progress.advance(self._name, len(chunk))
        return chunk

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._progress is not None:
            self._progress.finish(self._name)


class OciFetcher(RequestsFetcher):
    """``RequestsFetcher`` for one registry repository (see the module doc).

    Args:
        ref: the registry and repository.
        config: the limits.
        login: the login for the registry (``oci_auth.login_for``), or None (anonymous).
        push: ask tokens for ``pull,push`` (``mirror push``) rather than ``pull``.
    """

    def __init__(self, ref: OciRef, config: FetchConfig | None = None, *, login: Login | None = None,
                 push: bool = False, **kwargs: Any) -> None:
        super().__init__(config, plain_http_origins=[ref.api] if ref.plain_http else (), **kwargs)
        self.ref = ref
        self.login = login
        self.scope = f"repository:{ref.repository}:{'pull,push' if push else 'pull'}"
        self._origin = origin_of(ref.api)
        self._auth: Credential | None = None
        self._auth_lock = threading.Lock()
        self._digests: dict[str, str] = {}
        self._indexes: dict[str, dict[str, Layer]] = {}
        self._index_lock = threading.Lock()

    # -- addressing -------------------------------------------------------------------------------

    def learn(self, url_or_path: str, sha256: str) -> None:
        """The blob of ``sha256`` is what ``url_or_path`` (``oci://HOST/REPO/<path>``, or the path)
        names: the digest the caller will accept, so it is the one fetched."""
        path = self.ref.path_of(url_or_path)
        self._digests[path if path is not None else url_or_path] = sha256.lower()

    def index(self, repo: str) -> dict[str, Layer]:
        """The files the registry's index of ``repo`` names, by mirror path (read once; empty when
        it has none).

        Raises:
            BadFile: the index manifest is not one.
            DownloadError: as ``open``.
        """
        with self._index_lock:
            known = self._indexes.get(repo)
            if known is not None:
                return known
            got = self.manifest(index_tag(repo))
            layers = {} if got is None else {
                layer.title: layer for layer in parse_manifest(got[0], f"{self.ref.describe()}:{index_tag(repo)}")}
            self._indexes[repo] = layers
            return layers

    def resolve(self, url: str) -> str:
        """The URL of the registry's blob that ``url`` names (any other URL as given).

        Raises:
            DownloadError: the registry holds no such file (404), or its index cannot be read.
        """
        path = self.ref.path_of(url)
        if path is None:
            return url
        sha = self._digests.get(path)
        if sha is None:
            repo = "/".join(path.split("/")[:2])
            layer = self.index(repo).get(path) if path.count("/") >= 2 else None
            if layer is None:
                raise DownloadError(url, f"{self.ref.describe()} holds no such file (its index {index_tag(repo)} "
                                    "does not name it)", status=404, fix=self._push_fix())
            sha = layer.sha256
        return self.ref.blob_url(sha)

    def _push_fix(self) -> str:
        return f"push the lock that names it: `superfluid mirror push {self.ref.root.rstrip('/')} --lock FILE`"

    # -- GET: the base class's rules, after addressing and with the challenge answered ------------

    def open(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        credential: Credential | None = None,
        max_bytes: int | None = None,
        accept: Collection[int] = (),
    ) -> FetchResponse:
        """``Fetcher.open`` of the blob ``url`` names (see ``resolve``), a ``401`` answered once.

        Raises:
            DownloadError: as ``Fetcher.open``; a 401 not cured by the login names the fix.
        """
        target = self.resolve(url)
        wanted = frozenset(accept)
        for answered in (False, True):
            auth = credential or self._auth
            try:
                r = super().open(target, headers, credential=auth, max_bytes=max_bytes, accept=wanted | {401})
            except DownloadError as e:
                raise self._named(e, url, target) from None
            if r.status != 401 or 401 in wanted:
                return r
            challenge, at = r.headers.get("www-authenticate"), r.url
            r.close()
            if origin_of(at) != self._origin:
                raise DownloadError(at, f"HTTP 401 unauthorized (a redirect of {target})", status=401)
            if answered or credential is not None or not self._answer(challenge, auth):
                raise self._unauthorized(target)
        raise AssertionError("unreachable")

    def _named(self, e: DownloadError, url: str, target: str) -> DownloadError:
        if e.status == 404 and target.startswith(self.ref.api + f"/v2/{self.ref.repository}/blobs/"):
            digest = target.rsplit("/", 1)[-1]
            return DownloadError(url, f"{self.ref.describe()} holds no blob {digest} (HTTP 404)", status=404,
                                 fix=self._push_fix())
        return e

    def _answer(self, header: str | None, failed: Credential | None) -> bool:
        """Answer a challenge: whether a new ``Authorization`` is there to try."""
        challenge = parse_challenge(header)
        if challenge is None:
            return False
        with self._auth_lock:
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

    def _token(self, challenge: Any) -> str:
        """A token from the challenge's realm, asked with the login when there is one (only over
        HTTPS or to loopback: the base class's scheme rule)."""
        try:
            url = token_url(challenge, self.scope)
        except ValueError as e:
            raise DownloadError(self.ref.api, str(e)) from None
        login = Credential(origin_of(url), self.login.basic()) if self.login is not None else None

        def attempt(_: int) -> bytes:
            with super(OciFetcher, self).open(url, {"Accept": "application/json"}, credential=login,
                                              max_bytes=_TOKEN_MAX_BYTES, accept=(401, 403)) as r:
                if r.status in (401, 403):
                    raise self._unauthorized(url.split("?", 1)[0], token=True)
                return r.read()

        return parse_token(self._once_or_retried(url, attempt), f"the token service {url.split('?', 1)[0]}")

    def _once_or_retried(self, url: str, op: Callable[[int], Any]) -> Any:
        """``retry(url, op)``; or one attempt when this thread is inside a retry already (a challenge
        or an index read while a download is tried): the outer loop retries it, the two never multiply."""
        if getattr(self._waiting, "since", None) is not None:
            return op(0)
        return self.retry(url, op)

    def _unauthorized(self, url: str, *, token: bool = False) -> DownloadError:
        host = self.ref.host
        what = "its token service refused" if token else f"{self.ref.describe()} refused"
        if self.login is None:
            return DownloadError(url, f"HTTP 401 unauthorized: {self.ref.describe()} asks for a login, and there "
                                 f"is none for {host}", status=401,
                                 fix=f"`docker login {host}` (or an auths entry for {host} in REGISTRY_AUTH_FILE)")
        return DownloadError(url, f"HTTP 401 unauthorized: {what} the login of {self.login.user!r} from "
                             f"{self.login.source}", status=401, fix=f"log in again: `docker login {host}`")

    # -- reads of the registry's own documents ----------------------------------------------------

    def manifest(self, reference: str) -> tuple[bytes, str] | None:
        """The manifest ``reference`` (a tag) names and the SHA-256 of its bytes, or None (404).

        Raises:
            DownloadError: as ``open``.
        """
        url = self.ref.manifest_url(reference)

        def attempt(_: int) -> bytes:
            with self.open(url, {"Accept": MANIFEST_TYPE, "Accept-Encoding": "identity"},
                           max_bytes=MANIFEST_MAX_BYTES) as r:
                return r.read()

        try:
            body: bytes = self._once_or_retried(url, attempt)
        except DownloadError as e:
            if e.status == 404:
                return None
            raise
        return body, hashlib.sha256(body).hexdigest()

    def blob(self, sha256: str, *, max_bytes: int) -> bytes:
        """A small blob's bytes, checked against its digest.

        Raises:
            VerificationError: other bytes.
            DownloadError: as ``open``.
        """
        url = self.ref.blob_url(sha256)
        _, body = self.get_bytes(url, max_bytes=max_bytes, headers={"Accept-Encoding": "identity"})
        got = hashlib.sha256(body).hexdigest()
        if got != sha256:
            raise VerificationError(url, "sha256", sha256, got)
        return body

    # -- push ---------------------------------------------------------------------------------------

    def has_blob(self, sha256: str) -> bool:
        """Whether the repository holds the blob (``HEAD``; a redirect is followed without the
        credential off the registry's origin)."""
        reply = self.send("HEAD", self.ref.blob_url(sha256), accept=(404,))
        return reply.status != 404

    def has_manifest(self, tag: str, sha256: str) -> bool:
        """Whether ``tag`` names the manifest of ``sha256`` already (``HEAD``, its digest header)."""
        reply = self.send("HEAD", self.ref.manifest_url(tag), headers={"Accept": MANIFEST_TYPE}, accept=(404,))
        return reply.status != 404 and reply.headers.get("docker-content-digest") == f"sha256:{sha256}"

    def upload(self, sha256: str, size: int, source: bytes | Path, *, progress: Any = None, name: str = "") -> None:
        """Upload one blob: ``POST`` an upload session, then one ``PUT`` of the whole body with its
        digest (the registry checks it too). Retried whole: a session that failed is not reused.

        Raises:
            DownloadError: the registry refused it or the transfer failed after the retries.
        """
        start = self.ref.upload_url()

        def attempt(_: int) -> None:
            began = self.send_once("POST", start, headers={"Content-Length": "0"}, accept=(202,))
            location = began.headers.get("location")
            if not location:
                raise DownloadError(start, f"HTTP {began.status} without a Location for the upload")
            target = urljoin(start, location)
            target += ("&" if "?" in target else "?") + f"digest=sha256:{sha256}"
            body = _Body(source, size, progress, name or sha256[:12])
            try:
                self.send_once("PUT", target, body=body, accept=(201,),
                               headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})
            finally:
                body.close()

        self.retry(start, attempt)

    def put_manifest(self, tag: str, body: bytes) -> None:
        """``PUT`` a manifest under ``tag``.

        Raises:
            DownloadError: the registry refused it (its error code and message named).
        """
        self.send("PUT", self.ref.manifest_url(tag), body=body, accept=(201,),
                  headers={"Content-Type": MANIFEST_TYPE, "Content-Length": str(len(body))})

    def send(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
             body: bytes | _Body | None = None, accept: Collection[int] = ()) -> Reply:
        """``send_once``, retried as ``Fetcher.retry`` says (a body of bytes only: it is sent again)."""
        return self.retry(url, lambda _: self.send_once(method, url, headers=headers, body=body, accept=accept))

    def send_once(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
                  body: bytes | _Body | None = None, accept: Collection[int] = ()) -> Reply:
        """One ``method`` request with a challenge answered once; a 2xx or a status in ``accept``.

        Raises:
            DownloadError: any other status (retryable for 5xx and 429), or the transport.
        """
        for answered in (False, True):
            auth = self._auth
            reply = self._request(method, url, headers or {}, body, auth)
            if reply.status != 401 or 401 in accept:
                break
            if answered or not self._answer(reply.headers.get("www-authenticate"), auth):
                raise self._unauthorized(url)
            if isinstance(body, _Body):  # a streamed body was spent on the refusal: the caller retries
                raise DownloadError(url, "HTTP 401 before the upload was authorized; trying again", retryable=True)
        return self._judge(reply, accept)

    def _judge(self, reply: Reply, accept: Collection[int]) -> Reply:
        if 200 <= reply.status < 300 or reply.status in accept:
            return reply
        try:  # the base class's status rule: 429 and 5xx retryable, Retry-After honoured
            self._check_status(FetchResponse(reply.url, reply.status, reply.headers, iter(())), (), None)
        except DownloadError as e:
            detail = _oci_detail(reply.body)
            if detail:
                e.message += f" ({detail})"
            raise
        raise DownloadError(reply.url, f"HTTP {reply.status}", status=reply.status)

    def _request(self, method: str, url: str, headers: Mapping[str, str], body: bytes | _Body | None,
                 auth: Credential | None) -> Reply:
        """One request, redirects of a ``HEAD`` followed by hand (the credential only at its origin)."""
        import requests

        current = url
        for hop in range(self.config.max_redirects + 1):
            self._check_url(current, redirected_from=url if hop else None)
            send = {"User-Agent": self.config.user_agent, **headers}
            if auth is not None and origin_of(current) == auth.origin:
                send["Authorization"] = auth.authorization
            with self._count_lock:
                self.requests_made += 1
            timeout = (self._time_left(self.config.connect_timeout), self._time_left(self.config.stall_timeout))
            try:
                r = self._session().request(method, current, headers=send, data=body, allow_redirects=False,
                                            timeout=timeout, auth=_no_auth)
            except requests.exceptions.Timeout as e:
                raise DownloadError(current, f"no answer within {timeout[1]:g} s ({method})", retryable=True) from e
            except requests.exceptions.ConnectionError as e:
                raise DownloadError(current, f"could not connect ({method}): {type(e).__name__}",
                                    retryable=True) from e
            except requests.exceptions.RequestException as e:
                raise DownloadError(current, f"{method} failed: {e}") from e
            reply = Reply(r.status_code, Headers(r.headers), current, r.content[:_ERROR_BODY_BYTES])
            r.close()
            if reply.status in _REDIRECTS and method == "HEAD" and reply.headers.get("location"):
                current = urljoin(current, reply.headers["location"])
                continue
            return reply
        raise DownloadError(url, f"more than {self.config.max_redirects} redirects")


def fetcher_for_ref(ref: OciRef, environ: Mapping[str, str], config: FetchConfig | None = None, *,
                    push: bool = False, sleep: Callable[[float], None] | None = None) -> OciFetcher:
    """An ``OciFetcher`` for ``ref`` with the login the environment's auth file holds for it.

    Raises:
        BadFile: the auth file is broken.
    """
    from superfluid.installer.sources.oci.auth import login_for

    extra: dict[str, Any] = {"sleep": sleep} if sleep is not None else {}
    return OciFetcher(ref, config, login=login_for(ref.host, ref.repository, environ), push=push, **extra)
