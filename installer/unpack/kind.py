"""What a file that does not read as an archive is, told by its first bytes: the words of its refusal."""

from __future__ import annotations

import os

from superfluid.installer.cache.prune import is_archive

# A ``--from`` file that is a text file, an engine library or a web page is named for what it is, not
# called a corrupt download to fetch again; an archive format that does not read is named as one that
# is cut short or damaged.

__all__ = ["describe"]

#: (magic bytes at offset 0, what a file of them is) of formats that are never a release archive
_OTHER: tuple[tuple[bytes, str], ...] = (
    (b"\x7fELF", "an ELF binary (a library or program, not an archive of one)"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O binary (a library or program, not an archive of one)"),
    (b"MZ", "a Windows executable"),
    (b"%PDF", "a PDF document"),
    (b"GGUF", "a GGUF model file"),
)
_HEAD = 4096


def describe(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it is no archive format at all (``"a text file (its first line: …)"``,
    ``"an empty file"``, ``"an ELF binary …"``), or None: it starts as an archive does (then it is one
    that is cut short or damaged), or it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return None
    if is_archive(head):  # the archive formats are the cache's one rule (``prune.is_archive``)
        return None
    if not head:
        return "an empty file"
    other = next((what for magic, what in _OTHER if head.startswith(magic)), None)
    if other is not None:
        return other
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not a character cut at the end of the head: binary
            return "binary data of no archive format"
        text = head[:e.start].decode("utf-8")
    if "\x00" in text:
        return "binary data of no archive format"
    lowered = text.lstrip().lower()
    if lowered.startswith(("<!doctype html", "<html")):
        return "an HTML page (a web page saved in place of the file?)"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    shown = first if len(first) <= 60 else first[:57] + "..."
    return f"a text file (its first line: {shown!r})" if shown else "a text file of blank lines"
