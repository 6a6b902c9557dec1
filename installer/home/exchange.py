"""Two names of a folder swapped in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``), and whether a
folder's filesystem can: what replaces an install, or a file in ``current``'s place, without a moment
where neither is there (docs/install.md, "Managing installs")."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import sys

__all__ = ["exchange", "exchanges_in"]

_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def exchange(a: str, b: str) -> bool:
    """Swap the paths ``a`` and ``b`` atomically; False where the kernel, the C library or the
    filesystem has no such swap (then nothing was changed).

    Raises:
        OSError: the swap was refused for another reason (a path missing, no permission).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), a, None, b)


def exchanges_in(folder: str) -> bool | None:
    """Whether two names in ``folder`` are swapped in one step there (``exchange``), asked of its
    filesystem with two empty folders made beside each other, swapped and removed (named as a
    staging folder is, ``.staging-probe-<pid>-<random>``, so that a kill between leaves what the
    next writer of a runtime's folder removes); None when that cannot be asked (the folder is not
    there or cannot be written)."""
    made: list[str] = []
    try:
        for _ in range(2):
            path = os.path.join(folder, f".staging-probe-{os.getpid()}-{secrets.token_hex(8)}")
            os.mkdir(path, 0o700)
            made.append(path)
        return exchange(made[0], made[1])
    except OSError:
        return None
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                os.rmdir(path)
