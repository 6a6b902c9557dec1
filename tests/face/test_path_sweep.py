"""A path given as a flag's value is judged the same on every command (issue 42, design point 4, items
24 and 26): missing, of the other kind (a directory where a file is asked, a file where a directory
is), a FIFO or a device is exit 2, naming the path and what it is, never "no such file" for a path
that exists, never waited on (a FIFO is never opened). Through the real console scripts.

Every flag or argument of both trees whose value is a path (its metavar says FILE, DIR, PATH, PUB,
SRC, OLD or NEW) is in ``CASES``, so a new one is swept too."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import pytest

from superfluid.manifest.command import _parser as manifest_parser
from superfluid.manifest.tuf_keys import init_keys
from superfluid.parser import parser, walk
from tests import cli

#: (program, its words with {p} for the path swept ({d}: a directory, {t}: a text file, {k}: a TUF key
#: set, {m}: a file a runtime's format claims), what it asks ("file" or "dir"), whether nothing there is
#: fine (an output the command makes))
CASES: list[tuple[str, str, str, bool]] = [
    ("superfluid", "runtime install --locked {p}", "file", False),
    ("superfluid", "runtime install basert --from {p}", "file", False),
    ("superfluid", "runtime install basert --dry-run --for {p}", "file", False),
    ("superfluid", "runtime install basert --dry-run --for {t} --key {p}", "file", False),
    ("superfluid", "runtime install basert --dry-run --for 0.1.0 --trust-root {p}", "file", False),
    ("superfluid", "runtime versions basert --for {p}", "file", False),
    ("superfluid", "runtime versions basert --for {t} --key {p}", "file", False),
    ("superfluid", "runtime versions basert --for 0.1.0 --trust-root {p}", "file", False),
    ("superfluid", "runtime update basert --dry-run --for {p}", "file", False),
    ("superfluid", "runtime update basert --dry-run --for {t} --key {p}", "file", False),
    ("superfluid", "runtime update basert --dry-run --for 0.1.0 --trust-root {p}", "file", False),
    ("superfluid", "runtime gc basert --lock {p}", "file", False),
    ("superfluid", "runtime check basert --model {p}", "file", False),
    ("superfluid", "cache du --keep-lock {p}", "file", False),
    ("superfluid", "cache prune --keep-lock {p} --dry-run", "file", False),
    ("superfluid", "mirror sync {d} --lock {p}", "file", False),
    ("superfluid", "mirror sync {p} --lock {t}", "dir", True),
    ("superfluid", "mirror verify {d} --lock {p}", "file", False),
    ("superfluid", "mirror verify {p} --lock {t}", "dir", False),
    ("superfluid", "mirror push oci://127.0.0.1:9/fleet/engines --lock {p}", "file", False),
    ("superfluid", "lock --offline -o {p}", "file", True),
    ("superfluid", "lock --offline --check -o {p}", "file", False),
    ("superfluid", "lock --offline --for {p}", "file", False),
    ("superfluid", "lock --offline --for {t} --key {p}", "file", False),
    ("superfluid", "lock --offline --for 0.1.0 --trust-root {p}", "file", False),
    ("superfluid", "compat --release {p}", "file", False),
    ("superfluid", "compat --release {t} --key {p}", "file", False),
    ("superfluid", "compat --service http://127.0.0.1:9/ --runtime basert --abi 1 --trust-root {p}", "file", False),
    ("superfluid", "serve --model {p}", "file", False),
    ("superfluid", "serve --model {m} --sessions {p}", "dir", True),
    ("superfluid", "runtimes {p}", "file", False),
    ("superfluid", "attestation verify {p} --bundle {t} --repo OWNER/NAME", "file", False),
    ("superfluid", "attestation verify {t} --bundle {p} --repo OWNER/NAME", "file", False),
    ("superfluid", "attestation verify {t} --bundle {t} --repo OWNER/NAME --trust-root {p}", "file", False),
    ("superfluid-manifest", "check --source {p}", "dir", False),
    ("superfluid-manifest", "check --source {d} --key {p}", "file", False),
    ("superfluid-manifest", "serve --source {p} --port 0", "dir", False),
    ("superfluid-manifest", "serve --source {d} --key {p} --port 0", "file", False),
    ("superfluid-manifest", "serve --source {d} --tuf-repo {p} --tuf-keys {k} --port 0", "dir", True),
    ("superfluid-manifest", "serve --source {d} --tuf-repo {d}/repo --tuf-keys {p} --port 0", "dir", False),
    ("superfluid-manifest", "export --source {p} {d}/site", "dir", False),
    ("superfluid-manifest", "export --source {d} --key {p} {d}/site", "file", False),
    ("superfluid-manifest", "export --source {d} --tuf-keys {p} {d}/site", "dir", False),
    ("superfluid-manifest", "export --source {d} {p}", "dir", True),
    ("superfluid-manifest", "keys init {p}", "dir", True),
    ("superfluid-manifest", "refresh-timestamp --tuf-keys {p} {d}", "dir", False),
    ("superfluid-manifest", "refresh-timestamp --tuf-keys {k} {p}", "dir", False),
    ("superfluid-manifest", "rotate-root --tuf-keys {p} {d}", "dir", False),
    ("superfluid-manifest", "rotate-root --tuf-keys {k} --to {p} {d}", "dir", False),
    ("superfluid-manifest", "rotate-root --tuf-keys {k} {p}", "dir", False),
]

#: what each fault is: (its name, how it is made under a folder, what a message calls it)
FAULTS = ("missing", "other-kind", "fifo", "device")

#: where nothing answers: no run of the sweep reaches a network
NOWHERE = "http://127.0.0.1:9"

_PATH_METAVARS = ("FILE", "DIR", "PATH", "PUB", "SRC", "OLD", "NEW")


def _make(fault: str, asks: str, where: Path) -> tuple[Path, str | None]:
    """The faulty path, and the words that name what is there (None: nothing is)."""
    if fault == "missing":
        return where / "missing", None
    if fault == "other-kind":
        if asks == "dir":
            (where / "plain.txt").write_text("not a directory\n")
            return where / "plain.txt", "a regular file"
        (where / "folder").mkdir()
        return where / "folder", "a directory"
    if fault == "fifo":
        os.mkfifo(where / "fifo")
        return where / "fifo", "a FIFO"
    return Path("/dev/null"), "a character device"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("sweep-keys") / "keys"
    init_keys(where)
    return where


_IDS = [f"{program} {words.split('{p}')[0].strip()} {{p}}{'-may-be-missing' if ok else ''}"
        for program, words, _, ok in CASES]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize(("program", "words", "asks", "may_be_missing"), CASES, ids=_IDS)
def test_a_faulty_path_is_exit_2_naming_it_and_what_it_is(tmp_path: Path, keys: Path, program: str, words: str,
                                                           asks: str, may_be_missing: bool, fault: str) -> None:
    if fault == "missing" and may_be_missing:
        pytest.skip("nothing there is fine: the command makes it")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "d").mkdir()
    (tmp_path / "t.txt").write_text("not a document\n")
    (tmp_path / "m.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    path, what = _make(fault, asks, scratch)
    argv = [w.format(p=path, d=tmp_path / "d", t=tmp_path / "t.txt", k=keys, m=tmp_path / "m.gguf")
            for w in words.split()]
    (tmp_path / "home").mkdir()
    env = cli.environment(tmp_path / "home", SUPERFLUID_GITHUB_API=NOWHERE, SUPERFLUID_MANIFEST_URL=NOWHERE)
    try:
        done = cli.run(program, *argv, env=env, cwd=tmp_path, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{program} {' '.join(argv)} still ran after 10 s: it waits on {path}")
    assert done.code == 2, done.stderr
    assert str(path) in done.stderr and "Traceback" not in done.stderr, done.stderr
    if what is None:
        assert "no such file or directory" in done.stderr, done.stderr
    else:
        assert "no such" not in done.stderr.lower() and "does not exist" not in done.stderr, done.stderr
        assert what in done.stderr, done.stderr


#: flags whose value is a path or a URL, judged as a source (``--mirror URL|DIR``), not swept here
_SOURCES = {"--mirror"}


def _swept() -> set[tuple[str, str, str]]:
    """``(program, command, flag or argument's metavar)`` of every case."""
    trees = {"superfluid": dict(walk(parser())), "superfluid-manifest": dict(walk(manifest_parser()))}
    found = set()
    for program, words, _, _ in CASES:
        before = words.split("{p}")[0].split()
        plain = [w for w in before if not w.startswith("-")]
        command = max((" ".join(plain[:n]) for n in range(len(plain) + 1) if " ".join(plain[:n]) in trees[program]),
                      key=len)
        if before and before[-1].startswith("-"):
            found.add((program, command, before[-1]))
        else:  # an argument: the command's first
            node = trees[program][command]
            found.add((program, command, next(str(a.metavar or a.dest) for a in node._actions if not a.option_strings)))
    return found


def _takes_path(action: argparse.Action) -> bool:
    metavar = str(action.metavar or "").upper()
    return any(m in metavar for m in _PATH_METAVARS)


def test_every_path_flag_is_swept() -> None:
    """A flag or argument whose value is a path (by its metavar) that no case of the sweep gives is named here."""
    swept = _swept()
    missing = []
    for program, top in (("superfluid", parser()), ("superfluid-manifest", manifest_parser())):
        for path, node in walk(top):
            for action in node._actions:
                if not _takes_path(action) or _SOURCES & set(action.option_strings):
                    continue
                names = action.option_strings or [str(action.metavar or action.dest)]
                if not any((program, path, n) in swept for n in names):
                    missing.append(f"{program} {path} {names[-1]}")
    assert missing == [], missing
