"""``runtime/written``: a fact of a file this process wrote, answered while the file is unchanged."""

from __future__ import annotations

import os
from pathlib import Path

from superfluid.runtime.kernel.written import Written


def test_a_fact_is_kept_across_a_rename_and_a_chmod(tmp_path: Path) -> None:
    path = tmp_path / "a"
    path.write_bytes(b"12345")
    kept: Written[str] = Written()
    kept.keep(os.stat(path), "fact")
    moved = tmp_path / "b"
    path.rename(moved)
    moved.chmod(0o755)
    assert kept.get(os.stat(moved)) == "fact"


def test_a_file_rewritten_or_never_kept_has_none(tmp_path: Path) -> None:
    path, other = tmp_path / "a", tmp_path / "b"
    path.write_bytes(b"12345")
    other.write_bytes(b"12345")
    kept: Written[str] = Written()
    kept.keep(os.stat(path), "fact")
    assert kept.get(os.stat(other)) is None  # another file (inode)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # touched: another modification time
    assert kept.get(os.stat(path)) is None
    kept.keep(os.stat(path), "again")
    with path.open("ab") as f:
        f.write(b"6")  # grown: another size
    assert kept.get(os.stat(path)) is None
