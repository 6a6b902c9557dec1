"""A manifest service's answer fetched as a TUF target through ``tuf.ngclient.Updater``.

See docs/manifest-service.md, "The client".
"""

from __future__ import annotations

import datetime
import fcntl
import io
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote

from superfluid.installer.errors import DownloadError, SizeExceeded
from superfluid.installer.files import NotALockFile, open_lock_file
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.trust.refusals import (
    AnswerMismatch,
    EndlessData,
    FreezeRefused,
    FreshnessError,
    MixAndMatch,
    NoFreshness,
    NotListed,
    RollbackRefused,
    UntrustedSigner,
)
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError
from superfluid.runtime.kernel.jsonread import kind_of, read_bytes

if TYPE_CHECKING:
    from tuf.api.metadata import TargetFile
    from tuf.ngclient import Updater

__all__ = ["fetch_target", "check_folder"]

# python-tuf (with securesystemslib, cryptography and urllib3: about 80 ms) is imported where it is
# used, as the other heavy libraries are: asking a question of a service loads it, nothing else does
_ROLE = re.compile(r"\b(root|timestamp|snapshot|targets)\b")
_MAX_LOCAL = 8 << 20


def _seam(inner: Fetcher) -> Any:
    """ngclient's network seam over ours (a ``FetcherInterface``): it remembers the last metadata
    file fetched (``last_url``, ``last_body``), for the words of a refusal."""
    from tuf.api import exceptions as tuf_errors
    from tuf.ngclient.fetcher import FetcherInterface

    class Seam(FetcherInterface):
        def __init__(self, inner: Fetcher) -> None:
            self.inner = inner
            self.last_url = ""
            self.last_body: bytes | None = None
            self.last_limit = 0

        def _fetch(self, url: str) -> Iterator[bytes]:
            with self.download_file(url, self.inner.config.max_download_bytes) as f:
                yield f.read()

        @contextmanager
        def download_file(self, url: str, max_length: int) -> Iterator[IO[bytes]]:
            self.last_url, self.last_body, self.last_limit = url, None, max_length
            try:
                response, body = self.inner.get_bytes(url, max_bytes=max_length, accept=(403, 404))
            except SizeExceeded as e:
                raise tuf_errors.DownloadLengthMismatchError(f"{url}: more than {max_length} bytes") from e
            if response.status in (403, 404):
                raise tuf_errors.DownloadHTTPError(f"{url}: HTTP {response.status}", response.status)
            self.last_body = body
            yield io.BytesIO(body)

    return Seam(inner)


def _parse(data: bytes | None) -> Any:
    """The signed part of metadata, unverified (only for the words of a refusal), or None."""
    from tuf.api import exceptions as tuf_errors
    from tuf.api.metadata import Metadata

    if data is None:
        return None
    try:
        return Metadata.from_bytes(data).signed
    except (tuf_errors.RepositoryError, ValueError, TypeError, KeyError):
        return None


def _stamp(when: datetime.datetime) -> str:
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Words:
    """What a refusal says: the service, the trust folder's metadata, the last file fetched."""

    def __init__(self, service: str, directory: str, fetcher: Any) -> None:
        self.service = service
        self.directory = directory
        self.fetcher = fetcher

    def local(self, role: str) -> Any:
        if role == "root":
            roots = _root_versions(self.directory)
            name = os.path.join("root_history", f"{max(roots)}.root.json") if roots else "root.json"
        else:
            name = f"{role}.json"
        try:
            return _parse(read_bytes(os.path.join(self.directory, name), max_bytes=_MAX_LOCAL))
        except OSError:
            return None

    @property
    def fetched_role(self) -> str:
        name = self.fetcher.last_url.rsplit("/", 1)[-1]
        return "root" if name.endswith(".root.json") else name.removesuffix(".json")

    def remote(self) -> Any:
        return _parse(self.fetcher.last_body)

    def signed(self, role: str) -> Any:
        """``role``'s metadata as fetched last, else as the trust folder holds it."""
        remote = self.remote() if self.fetched_role == role else None
        return remote if remote is not None else self.local(role)

    def refusal(self, e: Exception) -> SuperfluidError:
        """The typed refusal of one of the library's errors during ``refresh``."""
        from tuf.api import exceptions as tuf_errors

        role = self.fetched_role
        url = self.fetcher.last_url.removeprefix(self.service)
        if isinstance(e, tuf_errors.DownloadHTTPError):
            if role == "timestamp":
                return NoFreshness(self.service, f"{self.service} publishes no TUF metadata ({url}: HTTP "
                                   f"{e.status_code}): the freshness of its answers cannot be checked, refused",
                                   role=role, advice="its operator exports with superfluid-manifest export --tuf-keys "
                                   "(or serves with --tuf-repo DIR --tuf-keys KEYS); to ask anyway, give "
                                   "--insecure-no-freshness")
            return FreshnessError(self.service, f"{url} answers HTTP {e.status_code}, though the metadata names it",
                                  role=role)
        if isinstance(e, tuf_errors.DownloadLengthMismatchError):
            return EndlessData(self.service, f"{url} is longer than its metadata says (more than "
                               f"{self.fetcher.last_limit} bytes): endless data, refused",
                               limit=self.fetcher.last_limit, role=role)
        if isinstance(e, tuf_errors.ExpiredMetadataError):
            return self._expired(e)
        if isinstance(e, tuf_errors.BadVersionNumberError):
            return self._version(e, role, url)
        if isinstance(e, tuf_errors.LengthOrHashMismatchError):
            namer = "timestamp" if role == "snapshot" else "snapshot"
            named = self.local(namer)
            return MixAndMatch(self.service, f"{url} does not match the length and SHA-256 {namer}"
                               f"{f' version {named.version}' if named is not None else ''} states for it: answers "
                               "of different index versions (mix-and-match) or tampered, refused", role=role)
        if isinstance(e, tuf_errors.UnsignedMetadataError):
            return self._unsigned(e, role)
        if isinstance(e, tuf_errors.DownloadError):
            return DownloadError(self.fetcher.last_url, str(e))
        return FreshnessError(self.service, f"{url or self.service}: its TUF metadata is refused ({e})", role=role)

    def _expired(self, e: Exception) -> SuperfluidError:
        found = _ROLE.search(str(e))
        role = found[1] if found else self.fetched_role
        signed = self.signed(role)
        expires = _stamp(signed.expires) if signed is not None else "?"
        now = datetime.datetime.now(datetime.timezone.utc)  # the clock the check read
        return FreezeRefused(self.service, role, expires, _stamp(now))

    def _version(self, e: Exception, role: str, url: str) -> SuperfluidError:
        remote, local = self.remote(), self.local(role)
        if role == "timestamp" and remote is not None and local is not None:
            if remote.version < local.version:
                return RollbackRefused(self.service, "timestamp", remote.version, local.version)
            if remote.snapshot_meta.version < local.snapshot_meta.version:
                return RollbackRefused(self.service, "snapshot", remote.snapshot_meta.version,
                                       local.snapshot_meta.version,
                                       named_by=f", as timestamp version {remote.version} names it")
        if role == "snapshot" and remote is not None:
            old = local.meta.get("targets.json") if local is not None else None
            new = remote.meta.get("targets.json")
            if old is not None and new is not None and new.version < old.version:
                return RollbackRefused(self.service, "targets", new.version, old.version,
                                       named_by=f", as snapshot version {remote.version} names it")
        if role in ("snapshot", "targets") and remote is not None:
            namer = "timestamp" if role == "snapshot" else "snapshot"
            return MixAndMatch(self.service, f"{url} is version {remote.version}, not the version the {namer} "
                               f"names: answers of different index versions (mix-and-match), refused", role=role)
        return FreshnessError(self.service, f"{url}: {e}, refused", role=role)

    def _unsigned(self, e: Exception, role: str) -> SuperfluidError:
        detail = str(e)
        if role == "root":
            new = self.remote()
            version = new.version if new is not None else "?"
            return UntrustedSigner(self.service, f"root version {version} is not signed by the threshold of keys root "
                                   f"version {version - 1 if isinstance(version, int) else '?'} trusts and its own "
                                   f"({detail}): a root rotation the old root did not sign, refused", role=role)
        return UntrustedSigner(self.service, f"{role} signed by a key root does not trust ({detail}: fewer than its "
                               "threshold of trusted signatures): refused", role=role)


def _root_versions(directory: str) -> list[int]:
    try:
        names = os.listdir(os.path.join(directory, "root_history"))
    except OSError:
        return []
    return sorted(int(n.split(".", 1)[0]) for n in names if re.fullmatch(r"[1-9][0-9]{0,9}\.root\.json", n))


#: a link ngclient itself makes: ``root.json`` naming the newest root of ``root_history/``
_ROOT_LINK = re.compile(r"root_history/[1-9][0-9]{0,9}\.root\.json")


def _refuse(path: str, what: str) -> BadFile:
    return BadFile(path, f"{what}; nothing in a trust folder is read or written through such a thing",
                   advice=f"remove {path} (the next ask of the service fetches what it needs anew)")


def _check_file(path: str, *, max_bytes: int) -> None:
    """``path`` absent, or a regular file (no link) of at most ``max_bytes``.

    Raises:
        BadFile: anything else is there: a link, a FIFO, a device, a folder, or too many bytes.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, f"is {kind_of(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        raise _refuse(path, f"is larger than {max_bytes} bytes ({st.st_size})")


def check_folder(directory: str, *, answer_bytes: int = _MAX_LOCAL) -> None:
    """Every file of a trust folder through the gate of the rest of the home before ngclient (which
    opens what it finds, following links and waiting on a FIFO) or we read one: regular files of at
    most ``_MAX_LOCAL`` bytes (``answer_bytes`` in ``answers/``); ``root.json`` may be the link
    ngclient makes to ``root_history/<N>.root.json``, nothing else may be a link.

    Raises:
        BadFile: names the first file that is not so.
    """
    for sub, cap in (("", _MAX_LOCAL), ("root_history", _MAX_LOCAL), ("answers", answer_bytes)):
        folder = os.path.join(directory, sub) if sub else directory
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(folder, f"is {kind_of(st.st_mode)}, not a folder")
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not sub and name in ("root_history", "answers", ".lock"):
                continue  # the two folders are checked in turn, the lock file by open_lock_file
            if not sub and name == "root.json" and os.path.islink(path):
                if not _ROOT_LINK.fullmatch(os.readlink(path)):
                    raise _refuse(path, f"is a symbolic link to {os.readlink(path)}")
                _check_file(os.path.join(directory, os.readlink(path)), max_bytes=cap)
                continue
            _check_file(path, max_bytes=cap)


@contextmanager
def _locked(directory: str) -> Iterator[None]:
    """One process at a time in a trust folder (ngclient's Updater is single-instance).

    Raises:
        BadFile: its lock file is a link, a FIFO or anything but a regular file.
    """
    path = os.path.join(directory, ".lock")
    try:
        fd = open_lock_file(path)
    except NotALockFile as e:
        raise _refuse(path, str(e.strerror)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _cached(path: str, info: TargetFile) -> bytes | None:
    from tuf.api import exceptions as tuf_errors


    try:
        data = read_bytes(path, max_bytes=info.length)
        info.verify_length_and_hashes(data)
        return data
    except (OSError, tuf_errors.LengthOrHashMismatchError):
        return None


def _download(updater: Updater, words: _Words, info: TargetFile, path: str) -> bytes:
    """The answer downloaded by ngclient into a new file of its own, renamed over ``path`` once
    verified: never written through what is at ``path`` (ngclient opens its path for writing)."""
    fresh = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}-{os.urandom(6).hex()}.tmp")
    try:
        where = _fetched(updater, words, info, fresh)
        os.replace(where, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(fresh)
        raise
    return read_bytes(path, max_bytes=info.length)


def _fetched(updater: Updater, words: _Words, info: TargetFile, path: str) -> str:
    """``updater.download_target`` into ``path``, its refusals in our words."""
    from tuf.api import exceptions as tuf_errors

    try:
        return updater.download_target(info, path)
    except tuf_errors.DownloadLengthMismatchError:
        raise EndlessData(words.service, f"answer {info.path} longer than its metadata says ({info.length} bytes): "
                          "endless data, refused", limit=info.length) from None
    except tuf_errors.LengthOrHashMismatchError:
        digest = next(iter(info.hashes.values()), "?")
        raise AnswerMismatch(words.service, f"answer {info.path} does not match its metadata (length {info.length}, "
                             f"SHA-256 {digest[:16]}…): tampered, or of another index version, refused") from None
    except tuf_errors.DownloadHTTPError as e:
        raise FreshnessError(words.service, f"answer {info.path} is listed by the index, but {words.service} answers "
                             f"HTTP {e.status_code}") from None


def _freshness(words: _Words) -> dict[str, Any]:
    ts = words.local("timestamp")
    versions = {role: getattr(words.local(role), "version", None) for role in ("snapshot", "targets")}
    return {"checked": True, "root": max(_root_versions(words.directory), default=None),
            "timestamp": getattr(ts, "version", None), **versions,
            "expires": _stamp(ts.expires) if ts is not None else None}


def fetch_target(service: str, path: str, *, anchor: bytes, anchor_where: str, directory: str,
                 fetcher: Fetcher) -> tuple[bytes, dict[str, Any]]:
    """The answer at ``service`` + ``path``, verified as a TUF target, and the metadata versions it
    was verified with (``freshness``).

    Args:
        service: the base URL, ending in ``/`` (its metadata under ``metadata/``).
        path: the target's path, relative to it.
        anchor: the root to start from (``--trust-root``, or the trust folder's newest).
        anchor_where: where the anchor was read (for the words).
        directory: the service's trust folder (exists; the Updater's metadata and ``answers/``).
        fetcher: the network seam for the service's URL.

    Raises:
        FreshnessError and its subclasses: a refusal, naming the attack.
        NotListed: the index lists no such answer.
        BadFile: the anchor is not a TUF root signed by itself.
        DownloadError: the service could not be reached.
    """
    from tuf.api import exceptions as tuf_errors
    from tuf.ngclient import Updater, UpdaterConfig

    # python-tuf's defaults, but at most 16 root rotations per run
    config = UpdaterConfig(max_root_rotations=16, prefix_targets_with_hash=False, app_user_agent="superfluid")
    seam = _seam(fetcher)
    words = _Words(service, directory, seam)
    answers = os.path.join(directory, "answers")
    with _locked(directory):
        check_folder(directory)
        try:
            updater = Updater(directory, service + "metadata/", answers, service, seam, config, bootstrap=anchor)
        except tuf_errors.RepositoryError as e:
            raise BadFile(anchor_where, f"is not a TUF root signed by its own keys ({e})") from None
        try:
            updater.refresh()
            info = updater.get_targetinfo(path)
        except (tuf_errors.RepositoryError, tuf_errors.DownloadError) as e:
            raise words.refusal(e) from None
        if info is None:
            raise NotListed(service, path)
        local = os.path.join(answers, quote(info.path, ""))
        data = _cached(local, info)
        if data is None:
            data = _download(updater, words, info, local)
        return data, _freshness(words)
