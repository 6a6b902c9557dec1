"""The one gate for JSON and files that came from outside: disk, a worker, a server, a document."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from itertools import accumulate
from typing import Any, BinaryIO

__all__ = ["kind_of", "MAX_DEPTH", "UntrustedJson", "NotRegularFile", "open_regular", "read_head", "read_bytes",
           "loads", "read_json"]

#: the deepest nesting of arrays and objects read; our own documents stay below 12
MAX_DEPTH = 64

# a JSON string token (escapes included): removed before brackets are counted
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class UntrustedJson(ValueError):
    """JSON refused by ``loads``: ``fault`` says why (with a line and column when the parser gave one)."""

    def __init__(self, fault: str, *, detail: str | None = None) -> None:
        super().__init__(fault)
        self.fault = fault
        #: the parser's own words, for a document that is not JSON at all
        self.detail = detail if detail is not None else fault


class NotRegularFile(OSError):
    """A path ``read_bytes`` does not read: a symbolic link, a FIFO, a device, a directory, or a
    file larger than asked. ``strerror`` words it (``"is a FIFO, not a regular file"``)."""


def kind_of(mode: int) -> str:
    """What a ``stat`` mode names, as a message says it (``a FIFO``, ``a directory``, ``a regular file``)."""
    kinds = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISLNK, "a symbolic link"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike[str], *, follow: bool = False) -> BinaryIO:
    """The regular file at ``path``, open for reading.

    The last component is opened with ``O_NOFOLLOW`` (a symbolic link is refused, never followed
    out of the home; ``follow``: a path the user named, or a library's soname link, whose links are
    followed) and ``O_NONBLOCK`` (a FIFO cannot hold the open), then ``fstat`` of the descriptor, not
    the name, must say regular file.

    Raises:
        FileNotFoundError: nothing is there.
        NotRegularFile: a link (without ``follow``), FIFO, device, socket or directory.
        OSError: it cannot be opened (permissions, I/O).
    """
    where = os.fspath(path)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(where, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow and os.path.islink(where):  # followed: a loop, said as such
            raise NotRegularFile(errno.ELOOP, "is a symbolic link, which is not followed", where) from None
        if e.errno == errno.ENXIO:  # a FIFO or socket with no writer, opened non-blocking for writing
            raise NotRegularFile(errno.ENXIO, "is not a regular file", where) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"is {kind_of(mode)}, not a regular file", where)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_head(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The first ``max_bytes`` bytes of the regular file at ``path``, its links followed (a host fact
    is in a file's head: a file longer than that, ``/proc/cpuinfo`` of many processors, is read no
    further).

    Raises:
        FileNotFoundError, NotRegularFile, OSError: as ``open_regular``, or the read fails.
    """
    with open_regular(path, follow=True) as f:
        return f.read(max_bytes)


def read_bytes(path: str | os.PathLike[str], *, max_bytes: int, follow: bool = False) -> bytes:
    """The bytes of the regular file at ``path`` (``open_regular``), at most ``max_bytes``: the read
    stops one byte past the cap.

    Raises:
        FileNotFoundError: nothing is there.
        NotRegularFile: a link, FIFO, device, socket or directory, or more than ``max_bytes``.
        OSError: it cannot be opened or read (permissions, I/O).
    """
    where = os.fspath(path)
    with open_regular(where, follow=follow) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise NotRegularFile(errno.EFBIG, f"is larger than {max_bytes} bytes ({size})", where)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while read
        raise NotRegularFile(errno.EFBIG, f"is larger than {max_bytes} bytes", where)
    return data


def _depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text``, strings left out, without recursion."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    return max(accumulate(1 if c in "[{" else -1 for c in brackets))


def _no_constant(name: str) -> Any:
    raise UntrustedJson(f"{name} is not a JSON value")


#: the escape of a UTF-16 surrogate (``\ud800``-``\udfff``), the only way one gets into a string parsed
#: from strict UTF-8 (an escaped backslash before ``ud8…`` matches too: a walk for nothing, never a miss)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_strings(doc: Any) -> None:
    """Every string (keys too) encodes as UTF-8: a lone surrogate from a ``\\ud800`` escape does not."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            items: Any = (item,)
        elif isinstance(item, dict):
            stack.extend(item.values())
            items = item.keys()
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for s in items:
            try:
                s.encode("utf-8")
            except UnicodeEncodeError:
                raise UntrustedJson(f"a string holds a lone surrogate ({s[:40]!r})") from None


def loads(data: bytes | str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """Parse untrusted JSON: at most ``max_bytes`` of strict UTF-8, nested at most ``max_depth``
    deep, no lone surrogate in any string, no ``NaN``/``Infinity``.

    Raises:
        UntrustedJson: any of those, or not JSON (with line and column).
    """
    if isinstance(data, bytes):
        if len(data) > max_bytes:
            raise UntrustedJson(f"is larger than {max_bytes} bytes ({len(data)})")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UntrustedJson(f"is not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})") from None
    else:
        text = data
        if len(text) > max_bytes:
            raise UntrustedJson(f"is larger than {max_bytes} characters ({len(text)})")
    depth = _depth(text)
    if depth > max_depth:
        raise UntrustedJson(f"is nested too deeply ({depth} levels; at most {max_depth} are read)")
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except UntrustedJson:
        raise
    except RecursionError:  # unreachable after the depth check; kept as a backstop
        raise UntrustedJson("is nested too deeply") from None
    except ValueError as e:
        line, col = getattr(e, "lineno", None), getattr(e, "colno", None)
        at = f" at line {line}, column {col}" if line else ""
        raise UntrustedJson(f"is not valid JSON{at} ({getattr(e, 'msg', e)})", detail=str(e)) from None
    if not isinstance(data, bytes) or _SURROGATE_ESCAPE.search(text):
        _check_strings(doc)  # strict UTF-8 holds no surrogate: only a \uD800-\uDFFF escape can make one
    return doc


def read_json(path: str | os.PathLike[str], *, max_bytes: int, max_depth: int = MAX_DEPTH,
              follow: bool = False) -> Any:
    """``loads(read_bytes(path))`` (``follow``: as ``read_bytes``).

    Raises:
        FileNotFoundError, NotRegularFile, OSError: as ``read_bytes``.
        UntrustedJson: as ``loads``.
    """
    return loads(read_bytes(path, max_bytes=max_bytes, follow=follow), max_bytes=max_bytes, max_depth=max_depth)
