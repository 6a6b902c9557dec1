"""Reading a host's fact file: through the one bounded reader, and, when it is refused, which file and why.

See docs/install.md, "What a build needs".
"""

# A fact file (/proc/cpuinfo, the NVIDIA driver's version, /etc/os-release, the loader's cache, libc.so.6...)
# is read as a regular file only, opened without blocking and up to a cap (kernel.jsonread): a FIFO, a
# device or a link to /dev/zero never holds a command. The fact it would have given is then not known,
# and the refusal is kept (``Unread``) so that ``doctor`` says which file and why. A file that is not
# there is no refusal: the host simply has none.

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from superfluid.runtime.kernel.jsonread import NotRegularFile, read_bytes, read_head

__all__ = ["Unread", "why", "absent", "under", "read_fact"]

_NOT_REGULAR = ", not a regular file"


@dataclass(frozen=True, slots=True)
class Unread:
    """A fact file that is there and could not be read: its path as the host sees it (not under a
    test's root), the fact key(s) of ``Host.to_json`` it would have given (``"glibcxx, cxxabi"``) and
    why (``"a FIFO"``, ``"a character device"``, ``"larger than 65536 bytes (70000)"``, ``"not
    readable: Permission denied"``, or an ELF library's fault: ``"bad magic b'...': not an ELF object"``)."""

    path: str
    fact: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "fact": self.fact, "why": self.why}


def under(root: str, path: str) -> str:
    """``path`` (absolute, on the host) as it lies under ``root``."""
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))


def absent(error: OSError) -> bool:
    """Whether ``error`` says the file is simply not there (nothing at the name, a dangling link, or
    a folder of its path that is a file): no refusal, the host has none."""
    return isinstance(error, (FileNotFoundError, NotADirectoryError))


def why(error: OSError) -> str:
    """Why a fact file was refused, in words: what it is when it is no regular file (``a FIFO``,
    ``a character device``, ``a directory``), ``larger than N bytes`` past a cap, else ``not readable:``
    and the system's words.

    >>> why(NotRegularFile(22, "is a FIFO, not a regular file", "/proc/cpuinfo"))
    'a FIFO'
    >>> why(PermissionError(13, "Permission denied"))
    'not readable: Permission denied'
    """
    if isinstance(error, NotRegularFile) and error.strerror:
        return error.strerror.removeprefix("is ").removesuffix(_NOT_REGULAR)
    return f"not readable: {error.strerror or error}"


def read_fact(root: str, path: str, fact: str, unread: list[Unread] | None, *, max_bytes: int,
              head: bool = False) -> bytes | None:
    """The bytes of the fact file ``path`` (a host path) under ``root``, links followed: the whole
    file up to ``max_bytes`` (a longer one is refused), or with ``head`` its first ``max_bytes`` (a
    fact in a file's head: ``/proc/cpuinfo`` of many processors). None when it is not there, or is
    refused: then ``unread`` (where a probe records the files it could not read; None: nobody asks)
    gets which file, for which ``fact``, and why."""
    where = under(root, path)
    try:
        return read_head(where, max_bytes) if head else read_bytes(where, max_bytes=max_bytes, follow=True)
    except OSError as e:
        if not absent(e) and unread is not None:
            unread.append(Unread(path, fact, why(e)))
        return None
