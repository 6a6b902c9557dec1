"""Another release's compat document, read and verified from a file or an ``http(s)`` URL, with the
signature and the tarball beside it: for ``compat --release`` and every ``--for``."""

from __future__ import annotations

import errno
import hashlib
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.manifest.keys import trusted_keys
from superfluid.manifest.release_files import SIGNATURE_SUFFIX
from superfluid.manifest.verdict import judge_release
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import NotRegularFile, read_bytes
from superfluid.runtime.kernel.layout import home as home_of

if TYPE_CHECKING:
    from superfluid.installer.transport.fetcher import Fetcher
    from superfluid.manifest.verdict import DocumentVerdict

__all__ = ["read_release"]

#: bytes a compat document read with --release may have
_MAX_BYTES = 4 << 20
#: bytes a .minisig may have (minisign's own line limits, with room)
_MAX_SIGNATURE_BYTES = 16 << 10

#: the fix for a compat document that is not there: the flags that read one
_NAME_ONE = "name an existing compat.json file or an https:// URL (with --release, or --for)"


def _too_large(max_bytes: int) -> str:
    return f"is larger than {max_bytes} bytes; not a compat document (what --release and --for read)"


class _Beside:
    """The document's place (a file path or an ``http(s)`` URL) and the files read beside it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.is_url = source.startswith(("https://", "http://"))
        self._fetcher: Fetcher | None = None

    def sibling(self, name: str) -> str:
        """Where a file named ``name`` beside the document is."""
        if self.is_url:
            return urljoin(self.source, name)
        return os.path.join(os.path.dirname(self.source), name)

    def signature(self) -> str:
        """``<source>.minisig`` (for a URL, on its path, before any query)."""
        if not self.is_url:
            return self.source + SIGNATURE_SUFFIX
        parts = urlsplit(self.source)
        return urlunsplit(parts._replace(path=parts.path + SIGNATURE_SUFFIX))

    def _web(self) -> Fetcher:
        if self._fetcher is None:
            # the user named the origin: plain http is theirs to choose
            self._fetcher = RequestsFetcher(plain_http_origins=[self.source])
        return self._fetcher

    def read(self, where: str, *, max_bytes: int, optional: bool = False) -> bytes | None:
        """The bytes at ``where``; None when ``optional`` and it is not there.

        Raises:
            BadFile: a file that cannot be read, or is larger than ``max_bytes``.
            DownloadError: a URL that could not be fetched (a 404 too, unless ``optional``).
        """
        if self.is_url:
            response, body = self._web().get_bytes(where, max_bytes=max_bytes, accept=(404,) if optional else ())
            return None if response.status == 404 else body
        try:  # a regular file (a FIFO or a device is never waited on or read without end)
            body = read_bytes(where, max_bytes=max_bytes, follow=True)
        except NotRegularFile as e:
            if e.errno == errno.EFBIG:
                raise BadFile(where, _too_large(max_bytes)) from None
            raise BadFile(where, f"cannot be read: it {e.strerror}") from None
        except FileNotFoundError:
            if optional:
                return None
            raise BadFile(where, "cannot be read (no such file)",
                          advice=_NAME_ONE) from None
        except OSError as e:
            raise BadFile(where, f"cannot be read ({e.strerror or e})") from None
        if len(body) > max_bytes:
            raise BadFile(where, _too_large(max_bytes))
        return body

    def sha256(self, where: str) -> str | None:
        """The SHA-256 of the file at ``where``, streamed; None when it is not there.

        Raises:
            BadFile: it exists and cannot be read.
            DownloadError: the URL could not be fetched (other than a 404).
        """
        if self.is_url:
            web = self._web()

            def attempt(_: int) -> str | None:
                hashed = hashlib.sha256()  # a retry hashes from the start
                with web.open(where, accept=(404,)) as response:
                    if response.status == 404:
                        return None
                    for chunk in response:
                        hashed.update(chunk)
                return hashed.hexdigest()

            return web.retry(where, attempt)
        digest = hashlib.sha256()
        try:
            if os.path.exists(where) and not os.path.isfile(where):  # a FIFO or a device is never read
                raise BadFile(where, "cannot be read: it is not a regular file")
            with open(where, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise BadFile(where, f"cannot be read ({e.strerror or e})") from None
        return digest.hexdigest()

    def close(self) -> None:
        if self._fetcher is not None:
            self._fetcher.close()


def read_release(source: str, *, keys: list[str] | None = None, home: str | None = None,
                 require_signature: bool = False) -> tuple[dict[str, Any], DocumentVerdict, str]:
    """Read, verify and validate another release's compat document from a file or an ``http(s)`` URL:
    the document, the verdict, and the SHA-256 of its bytes.

    The signature beside it is judged over the bytes as fetched, before the document is parsed;
    the tarball the document names is checked when it is beside it.

    Raises:
        BadFile: unreadable, not JSON, a schema major we do not know, not a compat document; or a
            trusted key file that does not read.
        BadKey: a trusted key file that is not a minisign public key.
        SignatureError: the signature does not verify, its key is not trusted, or (with
            ``require_signature``) there is none; ``BadSignatureFile`` when it does not parse.
        TarballMismatch: the tarball beside it has another SHA-256 than the document says.
        DownloadError: a URL could not be fetched.
    """
    trusted = trusted_keys(home if home is not None else home_of(), keys or [])
    beside = _Beside(source)
    try:
        body = beside.read(source, max_bytes=_MAX_BYTES)
        assert body is not None
        signature_at = beside.signature()
        signature = beside.read(signature_at, max_bytes=_MAX_SIGNATURE_BYTES, optional=True)
        doc, verdict = judge_release(body, signature, trusted, where=source, signature_where=signature_at,
                                     tarball_sha256=lambda name: beside.sha256(beside.sibling(name)),
                                     require=require_signature)
        return doc, verdict, hashlib.sha256(body).hexdigest()
    finally:
        beside.close()
