"""One OCI registry repository: ``Registry``, its distribution API (manifests, blobs by digest, the
index of a repository's files, the requests a push makes), and ``BlobFetcher``, the thin fetcher of its
files as ``oci://`` URLs, each the blob of the digest expected of it. See docs/fleet.md.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urljoin

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, SizeExceeded, VerificationError
from superfluid.installer.settings import Settings
from superfluid.installer.sources.oci.auth import Login, RegistryAuth, login_for, missing_auth_file, once_or_retried
from superfluid.installer.sources.oci.ref import (
    INDEX_MEDIA_TYPE,
    MANIFEST_MAX_BYTES,
    MANIFEST_TYPE,
    Layer,
    OciRef,
    Referrer,
    index_tag,
    parse_manifest,
    parse_referrers,
    referrers_tag,
)
from superfluid.installer.transport.fetcher import Fetcher, status_error
from superfluid.installer.transport.messages import Body, Credential, FetchResponse, Headers, HttpRequest, Upload
from superfluid.installer.transport.progress import Progress
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads

__all__ = ["Registry", "BlobFetcher", "Reply", "registry_for", "ANSWER_MAX_BYTES"]

T = TypeVar("T")

#: the most bytes of a registry's answer to a ``HEAD``, ``POST`` or ``PUT`` (the distribution
#: spec's are empty, or an error document): more is refused, as a download beyond its cap is
ANSWER_MAX_BYTES = 64 << 10
#: the bytes of an error answer kept for its message
_ERROR_BODY_BYTES = 4096
#: the statuses a registry's answer is judged by here, with its error document's words (a 401 is
#: the challenge ``RegistryAuth`` answers; a redirect is the fetcher's to follow)
_JUDGED = frozenset(range(400, 600)) - {401}
#: headers that would let a server answer ``304`` for a blob: a blob is named by its digest, and
#: bytes kept from an earlier answer are never taken for another digest's
_CONDITIONAL = frozenset({"if-none-match", "if-modified-since"})


@dataclass(frozen=True, slots=True)
class Reply:
    """A registry's answer to a ``HEAD``, ``POST`` or ``PUT``: status, headers, where, and the
    start of its body (for an error's words)."""

    status: int
    headers: Headers
    url: str
    body: bytes = b""


def _oci_detail(body: bytes) -> str:
    """``CODE: message`` of a distribution error answer (``{"errors": [{"code", "message"}]}``)."""
    try:
        doc = loads(body, max_bytes=_ERROR_BODY_BYTES * 4)
    except (UntrustedJson, ValueError):
        return ""
    errors = doc.get("errors") if isinstance(doc, dict) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    words = [str(first.get(k))[:200] for k in ("code", "message") if isinstance(first.get(k), str)]
    return ": ".join(words)


class Registry:
    """The distribution API of one registry repository. Every request (``GET``, ``HEAD``, ``POST``,
    ``PUT``, a token, a redirect) goes through one fetcher (``transport``), wrapped by
    ``RegistryAuth`` for the registry's challenges: the fetcher's rules (schemes, redirects, the
    credential at its origin only, statuses, the size cap and the stall rule on every answer,
    retries) are the same for a registry as for any source. A blob is asked by its digest and
    refused unless its bytes are that digest's.

    Args:
        ref: the registry and repository.
        transport: the fetcher that speaks HTTP to the registry (a ``RequestsFetcher``).
        login: the login for the registry (``auth.login_for``), or None (anonymous).
        push: ask tokens for ``pull,push`` (``mirror push``) rather than ``pull``.
    """

    def __init__(self, ref: OciRef, transport: Fetcher, *, login: Login | None = None, push: bool = False) -> None:
        self.ref = ref
        self.transport = transport
        self.auth = RegistryAuth(transport, ref, login, push=push)
        self._blob = re.compile(re.escape(ref.api) + f"/v2/{re.escape(ref.repository)}/blobs/sha256:([0-9a-f]{{64}})")
        self._indexes: dict[str, dict[str, Layer]] = {}
        self._index_lock = threading.Lock()

    @property
    def login(self) -> Login | None:
        return self.auth.login

    @property
    def config(self) -> FetchConfig:
        return self.transport.config

    def close(self) -> None:
        """Release the transport's pooled connections."""
        self.transport.close()

    def retry(self, url: str, op: Callable[[int], T]) -> T:
        """``op`` retried as the transport's rule says."""
        return self.transport.retry(url, op)

    def fetcher(self, digests: Mapping[str, str | None] | None = None) -> BlobFetcher:
        """The thin fetcher of this repository's files: each URL of ``digests`` (``oci://HOST/REPO/<path>``)
        as the blob of its digest, any other file as its index names it."""
        return BlobFetcher(self, digests or {})

    # -- one request ----------------------------------------------------------------------------------

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
        named: str | None = None,
    ) -> FetchResponse:
        """``RegistryAuth.request`` of ``url`` (a URL of the registry's API). A blob's ``GET`` is
        never conditional, and its whole body (``200``) is hashed as it arrives: its last chunk raises
        ``VerificationError`` unless it is the digest it was asked by. ``named``: the URL errors name
        (the ``oci://`` URL of the file; default ``url``).

        Raises:
            DownloadError: as ``Fetcher.request``; a 401 not cured by the login names the fix.
            VerificationError: while the body is read: a blob of other bytes than its digest.
        """
        method = method.upper()
        named = named or url
        m = self._blob.fullmatch(url) if method == "GET" else None
        send = dict(headers or {})
        if m is not None:
            send = {k: v for k, v in send.items() if k.lower() not in _CONDITIONAL}
        try:
            r = self.auth.request(method, url, send, body=body, credential=credential, max_bytes=max_bytes,
                                  accept=accept)
        except DownloadError as e:
            raise self._named(e, named, url) from None
        if m is not None and r.status == 200:
            return FetchResponse(r.url, r.status, r.headers, self._checked(r, named, m.group(1)), r.close)
        return r

    def _checked(self, r: FetchResponse, url: str, sha256: str) -> Iterator[bytes]:
        h = hashlib.sha256()
        for chunk in r:
            h.update(chunk)
            yield chunk
        got = h.hexdigest()
        if got != sha256:
            r.close()
            raise VerificationError(
                url, "sha256", sha256, got,
                advice=f"nothing was installed or cached: {self.ref.describe()} serves other bytes for the blob "
                       f"sha256:{sha256} than that digest (a registry checks digests when a blob is pushed, not "
                       f"when it is served); push the lock that names it into {self.ref.root.rstrip('/')} again "
                       "(mirror push), or tell whoever runs the registry")

    def _named(self, e: DownloadError, url: str, target: str) -> DownloadError:
        if e.status == 404 and self._blob.fullmatch(target):
            digest = target.rsplit("/", 1)[-1]
            return DownloadError(url, f"{self.ref.describe()} holds no blob {digest} (HTTP 404)", status=404,
                                 advice=self._push_advice())
        return e

    def _read(self, url: str, headers: Mapping[str, str], *, max_bytes: int) -> bytes:
        """One ``GET`` of ``url`` read whole (one attempt: the caller retries)."""
        with self.request("GET", url, headers, max_bytes=max_bytes) as r:
            return r.read()

    # -- addressing -----------------------------------------------------------------------------------

    def index(self, repo: str) -> dict[str, Layer]:
        """The files the registry's index of ``repo`` names, by mirror path (read once; empty when
        it has none).

        Raises:
            BadFile: the index manifest is not one.
            DownloadError: as ``request``.
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

    def resolve(self, url: str, sha256: str | None = None) -> str:
        """The URL of the registry's blob that ``url`` names: the blob of ``sha256`` when the caller
        expects that digest, else the one the index names for its path (any URL not below the
        repository as given).

        Raises:
            DownloadError: the registry holds no such file (404), or its index cannot be read.
        """
        path = self.ref.path_of(url)
        if path is None:
            return url
        if sha256:
            return self.ref.blob_url(sha256.lower())
        repo = "/".join(path.split("/")[:2])
        layer = self.index(repo).get(path) if path.count("/") >= 2 else None
        if layer is None:
            raise DownloadError(url, f"{self.ref.describe()} holds no such file (its index {index_tag(repo)} "
                                "does not name it)", status=404, advice=self._push_advice())
        return self.ref.blob_url(layer.sha256)

    def _push_advice(self) -> str:
        return f"push the lock that names it into {self.ref.root.rstrip('/')} (mirror push)"

    # -- reads of the registry's own documents --------------------------------------------------------

    def manifest(self, reference: str, *, accept: str = MANIFEST_TYPE) -> tuple[bytes, str] | None:
        """The manifest ``reference`` (a tag, or ``sha256:<hex>``) names and the SHA-256 of its bytes, or
        None (404); ``accept``: the media type asked (an image index's for a referrers tag).

        Raises:
            DownloadError: as ``request``.
        """
        return self._document(self.ref.manifest_url(reference), accept)

    def _document(self, url: str, accept: str) -> tuple[bytes, str] | None:
        """A manifest or index of the registry's API at ``url``, within ``MANIFEST_MAX_BYTES``, or None (404)."""

        def attempt(_: int) -> bytes:
            try:
                return self._read(url, {"Accept": accept, "Accept-Encoding": "identity"},
                                  max_bytes=MANIFEST_MAX_BYTES)
            except SizeExceeded as e:
                raise DownloadError(e.url, f"answered a manifest of more than {MANIFEST_MAX_BYTES} bytes (at least "
                                    f"{e.got}): not a registry's answer (distribution's are 4 MiB at most)") from None

        try:
            body = once_or_retried(self.transport, url, attempt)
        except DownloadError as e:
            if e.status == 404:
                return None
            raise
        return body, hashlib.sha256(body).hexdigest()

    def referrers(self, subject_sha256: str, artifact_type: str) -> list[Referrer]:
        """The manifests of ``artifact_type`` that refer to the manifest ``subject_sha256``: the referrers
        API's answer (``/v2/<repo>/referrers/<digest>``, OCI distribution 1.1), else, where the registry
        has no such API (404), the image index its referrers tag holds (``referrers_tag``); none when
        neither is there.

        Raises:
            BadFile: an answer that is not an image index.
            DownloadError: as ``request``.
        """
        api = f"{self.ref.api}/v2/{self.ref.repository}/referrers/sha256:{subject_sha256}?artifactType={artifact_type}"
        got = self._document(api, INDEX_MEDIA_TYPE)
        where = f"{self.ref.describe()} referrers of sha256:{subject_sha256}"
        if got is None:
            got = self.manifest(referrers_tag(subject_sha256), accept=INDEX_MEDIA_TYPE)
            where = f"{self.ref.describe()}:{referrers_tag(subject_sha256)}"
        if got is None:
            return []
        return [r for r in parse_referrers(got[0], where) if r.artifact_type == artifact_type]

    def put_manifest_by_digest(self, body: bytes, media_type: str = MANIFEST_TYPE) -> Reply:
        """``PUT`` a manifest (or an index) under its own digest, untagged; the registry's answer (its
        ``OCI-Subject`` header says it keeps the referrers of a manifest with a subject itself).

        Raises:
            DownloadError: the registry refused it.
        """
        digest = f"sha256:{hashlib.sha256(body).hexdigest()}"
        return self.call("PUT", self.ref.manifest_url(digest), body=body, accept=(201,),
                         headers={"Content-Type": media_type, "Content-Length": str(len(body))})

    def blob(self, sha256: str, *, max_bytes: int) -> bytes:
        """A small blob's bytes, checked against its digest as they arrive.

        Raises:
            VerificationError: other bytes.
            DownloadError: as ``request``.
        """
        url = self.ref.blob_url(sha256)
        return self.retry(url, lambda _: self._read(url, {"Accept-Encoding": "identity"}, max_bytes=max_bytes))

    # -- push -----------------------------------------------------------------------------------------

    def has_blob(self, sha256: str) -> bool:
        """Whether the repository holds the blob (``HEAD``; a redirect is followed without the
        credential off the registry's origin)."""
        reply = self.call("HEAD", self.ref.blob_url(sha256), accept=(404,))
        return reply.status != 404

    def has_manifest(self, tag: str, sha256: str) -> bool:
        """Whether ``tag`` names the manifest of ``sha256`` already (``HEAD``, its digest header)."""
        reply = self.call("HEAD", self.ref.manifest_url(tag), headers={"Accept": MANIFEST_TYPE}, accept=(404,))
        return reply.status != 404 and reply.headers.get("docker-content-digest") == f"sha256:{sha256}"

    def upload(self, sha256: str, size: int, source: bytes | Path, *, progress: Progress | None = None,
               name: str = "") -> None:
        """Upload one blob: ``POST`` an upload session, then one ``PUT`` of the whole body with its
        digest (the registry checks it too). Retried whole: a session that failed is not reused.

        Raises:
            DownloadError: the registry refused it or the transfer failed after the retries.
        """
        start = self.ref.upload_url()

        def attempt(_: int) -> None:
            began = self.call_once("POST", start, headers={"Content-Length": "0"}, accept=(202,))
            location = began.headers.get("location")
            if not location:
                raise DownloadError(start, f"HTTP {began.status} without a Location for the upload")
            target = urljoin(began.url, location)
            target += ("&" if "?" in target else "?") + f"digest=sha256:{sha256}"
            body = Upload(source, size, progress=progress, name=name or sha256[:12])
            try:
                self.call_once("PUT", target, body=body, accept=(201,),
                               headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})
            finally:
                body.close()

        self.retry(start, attempt)

    def put_manifest(self, tag: str, body: bytes, media_type: str = MANIFEST_TYPE) -> None:
        """``PUT`` a manifest (``media_type``: or an index) under ``tag``.

        Raises:
            DownloadError: the registry refused it (its error code and message named).
        """
        self.call("PUT", self.ref.manifest_url(tag), body=body, accept=(201,),
                  headers={"Content-Type": media_type, "Content-Length": str(len(body))})

    def call(self, method: str, url: str, *, headers: Mapping[str, str] | None = None, body: Body | None = None,
             accept: Collection[int] = ()) -> Reply:
        """``call_once``, retried as ``Fetcher.retry`` says (the body is sent again whole)."""
        return self.retry(url, lambda _: self.call_once(method, url, headers=headers, body=body, accept=accept))

    def call_once(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
                  body: Body | None = None, accept: Collection[int] = ()) -> Reply:
        """One ``method`` request (a challenge answered once), its answer read whole within
        ``ANSWER_MAX_BYTES`` and the stall rule; a 2xx or a status in ``accept``.

        Raises:
            DownloadError: any other status (retryable for 5xx and 429, the registry's error code
                and message named), an answer beyond the cap, or the transport.
        """
        try:
            with self.request(method, url, headers, body=body, max_bytes=ANSWER_MAX_BYTES,
                              accept=_JUDGED | frozenset(accept)) as r:
                data = r.read()
        except SizeExceeded as e:
            raise DownloadError(e.url, f"answered the {method} with more than {ANSWER_MAX_BYTES} bytes (at least "
                                f"{e.got}): not a registry's answer") from None
        return self._judge(Reply(r.status, r.headers, r.url, data[:_ERROR_BODY_BYTES]), accept)

    def _judge(self, reply: Reply, accept: Collection[int]) -> Reply:
        if 200 <= reply.status < 300 or reply.status in accept:
            return reply
        # the fetcher's status rule (429 and 5xx retryable, Retry-After honoured), the registry's words
        e = status_error(reply.url, reply.status, reply.headers, "", config=self.config, now=time.time(),
                         authenticated=False)
        detail = _oci_detail(reply.body)
        if detail:
            e.message += f" ({detail})"
        raise e


class BlobFetcher(Fetcher):
    """A registry repository's files as a fetcher of ``oci://HOST/REPO/<mirror path>`` URLs: each the
    blob of the digest the caller expects of it (``digests``, given where it fetches), else of the
    one the repository's index names, hashed as it arrives (``Registry.request``); any other URL is
    fetched as it is. Thin: every request is the registry's, every rule the registry's transport's.

    Args:
        registry: the repository's distribution API.
        digests: the SHA-256 expected of each URL (``None``: the index's).
    """

    def __init__(self, registry: Registry, digests: Mapping[str, str | None]) -> None:
        super().__init__(registry.config)
        self.registry = registry
        self._digests = {registry.ref.path_of(url) or url: sha.lower() for url, sha in digests.items() if sha}

    def _send(self, request: HttpRequest) -> FetchResponse:
        return self.registry.transport.send(request)

    def retry(self, url: str, op: Callable[[int], T]) -> T:
        return self.registry.retry(url, op)

    def retrying(self) -> bool:
        return self.registry.transport.retrying()

    def close(self) -> None:
        self.registry.close()

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
        """``Registry.request`` of the blob ``url`` names (``Registry.resolve``, by the digest expected
        of it); errors name ``url``.

        Raises:
            DownloadError: as ``Registry.request``; the registry holds no such file (404).
            VerificationError: while the body is read: a blob of other bytes than its digest.
        """
        path = self.registry.ref.path_of(url)
        target = self.registry.resolve(url, self._digests.get(path if path is not None else url))
        return self.registry.request(method, target, headers, body=body, credential=credential, max_bytes=max_bytes,
                                     accept=accept, named=url)


def registry_for(ref: OciRef, settings: Settings, config: FetchConfig | None = None, *,
                 push: bool = False, transport: Fetcher | None = None) -> Registry:
    """The ``Registry`` of ``ref`` with the login the settings' auth files hold for it, through
    ``transport`` (default: a ``RequestsFetcher``, plain ``http://`` to the registry when
    ``ref.plain_http``); ``config``: the limits (default ``settings.fetch``).

    Raises:
        BadFile: the auth file is broken.
    """
    login = login_for(ref.host, ref.repository, settings.auth_files)
    net = transport or RequestsFetcher(config or settings.fetch, plain_http_origins=[ref.api] if ref.plain_http else ())
    registry = Registry(ref, net, login=login, push=push)
    if login is None:  # a 401 names it
        registry.auth.missing_file = missing_auth_file(settings.auth_files, named=settings.auth_file_named)
    else:
        registry.auth.missing_file = None
    return registry
