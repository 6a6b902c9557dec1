"""Paths the user names on a command line, checked before anything opens them, by one checker for
every command (``flag_path``). See docs/cli.md, "Exit codes".
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from superfluid.runtime import registry
from superfluid.runtime.kernel import formats
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.jsonread import kind_of

# A FIFO named as a model, a lock or an archive would hold an ``open`` forever, a device would read
# without end, a directory named where a file is asked (or the reverse) would fail later under words
# that blame something else ("no such file" for a path that exists), and an unreadable file would fail
# later under words that blame the home. Nothing here opens the path: ``stat`` alone.

__all__ = ["flag_path", "asks_directory", "regular_file", "model_path"]


def asks_directory(kind: str) -> bool:
    """Whether ``kind`` (the words for what a flag names: ``lock file``, ``mirror directory``,
    ``directory of release folders``) is a directory: its first or last word is ``directory`` or ``folder``."""
    words = kind.split()
    return bool(words) and bool({words[0], words[-1]} & {"directory", "folder"})


def _named(flag: str, path: str) -> str:
    """``--lock /tmp`` (a flag and its value), or the path alone for an argument without a flag."""
    return f"{flag} {path}" if flag else path


def _a(kind: str) -> str:
    """``a lock file``, ``an archive``."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def _under_file(path: str) -> str | None:
    """The first folder of ``path``'s that exists and is not a directory (``/etc/passwd`` of
    ``/etc/passwd/x``), or None."""
    parts = Path(path)
    for parent in reversed(parts.parents):
        try:
            st = os.stat(parent)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return str(parent)
    return None


def _missing(flag: str, path: str, kind: str) -> UsageError:
    """The error of a path where nothing is: a dangling link, a path under a file, or nothing at all."""
    if os.path.islink(path):
        return UsageError(f"{_named(flag, path)} is a symbolic link to {os.readlink(path)}, where nothing is: "
                          f"name {_a(kind)} that exists")
    under = _under_file(path)
    if under is not None:
        return UsageError(f"{_named(flag, path)}: no such file or directory ({under} is {_kind_at(under)}, "
                          "not a directory)")
    return UsageError(f"{_named(flag, path)}: no such file or directory")


def _kind_at(path: str) -> str:
    try:
        return kind_of(os.stat(path).st_mode)
    except OSError:
        return "not a directory"


def _stat(flag: str, path: str, kind: str) -> os.stat_result | None:
    """The path's stat (links followed: the user named this path), or None when nothing is there."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise UsageError(f"{_named(flag, path)} cannot be reached (permission denied on a folder above it): "
                         f"give {_a(kind)} this user can reach") from None
    except OSError as e:
        raise UsageError(f"{_named(flag, path)} cannot be read ({e.strerror or e})") from None


def flag_path(value: str | os.PathLike[str], flag: str, kind: str = "file", *, must_exist: bool = True) -> Path:
    """``value`` as a ``Path``, when it is what ``flag`` asks: ``kind`` in words (``lock file``,
    ``archive``, ``mirror directory``; ``asks_directory`` says which kinds are directories, every
    other one is a regular file). A file asked must be readable by this user. ``must_exist=False``:
    nothing there is fine (an output the command writes), something of another kind is not. ``flag``
    ``""``: an argument without a flag, named by its path alone.

    Raises:
        UsageError (exit 2): the path is missing (when it must exist), under a file, a dangling link,
            a directory where a file is asked, a regular file where a directory is asked, a FIFO, a
            device or a socket, or a file this user cannot read; the message names the flag, the path
            and what it is (``--lock /tmp is a directory, not a lock file``).
    """
    path = os.fspath(value)
    st = _stat(flag, path, kind)
    if st is None:
        if must_exist or os.path.islink(path) or _under_file(path) is not None:
            raise _missing(flag, path, kind)
        return Path(path)
    want_dir = asks_directory(kind)
    is_dir, is_reg = stat.S_ISDIR(st.st_mode), stat.S_ISREG(st.st_mode)
    if (want_dir and not is_dir) or (not want_dir and not is_reg):
        raise UsageError(f"{_named(flag, path)} is {kind_of(st.st_mode)}, not {_a(kind)}")
    if is_reg and must_exist and not os.access(path, os.R_OK):
        raise UsageError(f"{_named(flag, path)} cannot be read (permission denied): give {_a(kind)} this user can read")
    return Path(path)


def regular_file(flag: str, path: str) -> str:
    """``path`` as given, when it is a regular file this user can read (``flag_path`` of a ``file``).

    Raises:
        UsageError: it is missing, not a regular file (a FIFO, a device, a directory...) or not readable;
            the message names the flag, the path and why.
    """
    flag_path(path, flag, "regular file")
    return path


def _reads_directories(runtime_id: str | None) -> bool:
    """Whether ``runtime_id`` (None: any runtime this release ships) declares a model directory format."""
    ids = registry.IDS if runtime_id is None else (runtime_id,)
    return any("directory" in fmt for rid in ids for fmt in registry.get(rid).model_facts().formats)


def model_path(flag: str, path: str, runtime_id: str | None = None) -> str:
    """``path`` as given, when it can be a model: a regular file, or a directory when the runtime
    asked (None: any) reads model directories (with none asked, one a runtime's declared format claims:
    ``runtimes /tmp`` is a usage error, as ``serve --model /tmp`` is); readable by this user. Never a
    FIFO or a device: the model is opened to choose and to check its runtime, and a FIFO would hold
    that open forever.

    Raises:
        UsageError: it is missing, a FIFO, a device, a socket, a directory the runtime does not read,
            or not readable; the message names the flag, the path and why.
    """
    st = _stat(flag, path, "model")
    if st is None:
        raise _missing(flag, path, "model")
    if stat.S_ISDIR(st.st_mode) and not _reads_directories(runtime_id):
        raise UsageError(f"{flag} {path} is a directory, and {runtime_id or 'no runtime'} reads a model file, "
                         "not a directory: name the model file")
    if stat.S_ISDIR(st.st_mode) and runtime_id is None:
        declared = {rid: registry.get(rid).model_facts().formats for rid in registry.IDS}
        if formats.claim(declared, formats.facts_of(path)) is None:  # a listing, never an open
            raise UsageError(f"{flag} {path} is a directory, and no runtime reads it as a model: "
                             f"{formats.describe(declared)}")
    if not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{flag} {path} is {kind_of(st.st_mode)}, not a model: a model is a regular file "
                         "(or an MLX model directory)")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{flag} {path} cannot be read (permission denied): give a file this user can read")
    return path
