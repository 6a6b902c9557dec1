"""Paths the user names on a command line, checked before anything opens them: a FIFO named as a
model or an archive would hold an ``open`` forever, a device would read without end, and an
unreadable file would fail later under words that blame the home."""

from __future__ import annotations

import os
import stat

from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.jsonread import kind_of

__all__ = ["regular_file", "model_path"]


def _stat(flag: str, path: str) -> os.stat_result:
    try:
        return os.stat(path)  # links followed: the user named this path
    except FileNotFoundError:
        raise UsageError(f"{flag} {path}: no such file or directory") from None
    except OSError as e:
        raise UsageError(f"{flag} {path} cannot be read ({e.strerror or e})") from None


def _readable(flag: str, path: str) -> None:
    if not os.access(path, os.R_OK):
        raise UsageError(f"{flag} {path} cannot be read (permission denied): give a file this user can read")


def regular_file(flag: str, path: str) -> str:
    """``path`` as given, when it is a regular file this user can read.

    Raises:
        UsageError: it is missing, not a regular file (a FIFO, a device, a directory...) or not readable;
            the message names the flag, the path and why.
    """
    st = _stat(flag, path)
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{flag} {path} is {kind_of(st.st_mode)}, not a regular file")
    _readable(flag, path)
    return path


def _reads_directories(runtime_id: str | None) -> bool:
    """Whether ``runtime_id`` (None: any runtime this release ships) declares a model directory format."""
    ids = registry.IDS if runtime_id is None else (runtime_id,)
    return any("directory" in fmt for rid in ids for fmt in registry.get(rid).model_facts().formats)


def model_path(flag: str, path: str, runtime_id: str | None = None) -> str:
    """``path`` as given, when it can be a model: a regular file, or a directory when the runtime
    asked (None: any) reads model directories; readable by this user. Never a FIFO or a device: the
    model is opened to choose and to check its runtime, and a FIFO would hold that open forever.

    Raises:
        UsageError: it is missing, a FIFO, a device, a socket, a directory the runtime does not read,
            or not readable; the message names the flag, the path and why.
    """
    st = _stat(flag, path)
    if stat.S_ISDIR(st.st_mode) and not _reads_directories(runtime_id):
        raise UsageError(f"{flag} {path} is a directory, and {runtime_id or 'no runtime'} reads a model file, "
                         "not a directory: name the model file")
    if not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{flag} {path} is {kind_of(st.st_mode)}, not a model: a model is a regular file "
                         "(or an MLX model directory)")
    _readable(flag, path)
    return path
