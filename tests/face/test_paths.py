"""The one checker of a path given as a flag's value (``superfluid.paths.flag_path``; issue 42, design
point 4): missing, under a file, a dangling link, a directory where a file is asked, a file where a
directory is asked, a FIFO (never opened), a device, unreadable: each a usage error naming the flag,
the path and what it is; never "no such file" for a path that exists."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from superfluid.paths import asks_directory, flag_path
from superfluid.runtime.kernel.errors import UsageError


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(("make", "kind", "words"), [
    pytest.param(lambda t: t / "missing", "lock file", "--flag {p}: no such file or directory", id="missing"),
    pytest.param(lambda t: t, "lock file", "--flag {p} is a directory, not a lock file", id="dir-for-file"),
    pytest.param(_fifo, "lock file", "--flag {p} is a FIFO, not a lock file", id="fifo-for-file"),
    pytest.param(_fifo, "mirror directory", "--flag {p} is a FIFO, not a mirror directory", id="fifo-for-dir"),
    pytest.param(lambda t: Path("/dev/null"), "archive", "--flag {p} is a character device, not an archive",
                 id="device"),
    pytest.param(lambda t: (t / "f").write_text("x") and t / "f", "mirror directory",
                 "--flag {p} is a regular file, not a mirror directory", id="file-for-dir"),
    pytest.param(lambda t: (t / "f").write_text("x") and t / "f" / "under", "lock file",
                 "--flag {p}: no such file or directory ({t}/f is a regular file, not a directory)", id="under-file"),
])
def test_each_fault_is_a_usage_error_naming_the_flag_the_path_and_what_it_is(tmp_path: Path, make, kind: str,
                                                                            words: str) -> None:
    path = make(tmp_path)
    with pytest.raises(UsageError) as raised:
        flag_path(str(path), "--flag", kind)
    assert str(raised.value) == words.format(p=path, t=tmp_path)


def test_a_fifo_is_named_never_opened(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    done = threading.Event()

    def check() -> None:
        with pytest.raises(UsageError):
            flag_path(fifo, "--lock", "lock file")
        done.set()

    threading.Thread(target=check, daemon=True).start()
    assert done.wait(5), "an open of the FIFO would wait for a writer"


def test_a_dangling_link_says_where_it_points(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(UsageError, match=f"--lock {link} is a symbolic link to {tmp_path}/gone, where nothing is"):
        flag_path(link, "--lock", "lock file", must_exist=False)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file_is_said_so(tmp_path: Path) -> None:
    locked = tmp_path / "l.lock"
    locked.write_text("x")
    locked.chmod(0)
    with pytest.raises(UsageError, match=r"cannot be read \(permission denied\): give a lock file"):
        flag_path(locked, "--lock", "lock file")


def test_what_is_asked_answers(tmp_path: Path) -> None:
    (tmp_path / "l.lock").write_text("x")
    assert flag_path(str(tmp_path / "l.lock"), "--lock", "lock file") == tmp_path / "l.lock"
    assert flag_path(tmp_path, "", "mirror directory") == tmp_path
    assert flag_path(tmp_path / "new.lock", "-o", "lock file", must_exist=False) == tmp_path / "new.lock"
    assert asks_directory("mirror directory") and asks_directory("folder") and not asks_directory("lock file")


def test_an_argument_without_a_flag_is_named_by_its_path(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match=f"^{tmp_path}/f is a regular file, not a mirror directory$"):
        flag_path(tmp_path / "f", "", "mirror directory", must_exist=False)
