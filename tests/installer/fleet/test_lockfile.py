"""The lock's format (installer/fleet/lockfile.py): written stable, read back equal, and every malformed
lock refused with the file, the line or key, and the reason; through the real CLI, never a
traceback and nothing written (SPEC §12, §8.5)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.lockfile import Engine, Lock, LockedFile, Target
from superfluid.installer.sources import mirror
from superfluid.installer.sources.mirror import Mirror
from superfluid.runtime.kernel.errors import BadFile, UsageError
from superfluid.runtime.kernel.schema import errors as schema_errors
from superfluid.runtime.planning import Sha256
from tests.fleet.conftest import machine_at

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SHA_A = Sha256(hashlib.sha256(b"a").hexdigest())
SHA_B = Sha256(hashlib.sha256(b"b").hexdigest())
BASE = "https://github.com/basecompute/baseRT/releases/download/v0.4.0/"


def _file(name: str, sha: Sha256 = SHA_A, *, evidence: bool = False) -> LockedFile:
    path = f"basecompute/baseRT/releases/download/v0.4.0/{name}"
    if evidence:
        return LockedFile(name=name, path=path, url=BASE + name, size=2, sha256=sha)
    return LockedFile(name=name, path=path, url=BASE + name, size=1234, sha256=sha, digest_source="release",
                      checked=("release", "api"))


def _engine(host: str = "cpu", backend: str = "cpu", runtime: str = "basert") -> Engine:
    return Engine(target=Target(runtime, "linux-x64", host), repo="basecompute/baseRT", version="0.4.0",
                  backend=backend, chosen_by="abi", abi=1, tested=True,
                  why="Linux x64: baseRT 0.4.0 states ABI 1",
                  assets=(_file(f"basert-engine-linux-x64-{backend}-0.4.0.tar.gz"),),
                  facts={}, evidence=(_file("basert-engine-abi-1.txt", SHA_B, evidence=True),))


LOCK = Lock("0.1.0", ("basert",), ("linux-x64",), ("cpu", "cuda"), (_engine("cpu"), _engine("cuda", "cuda")))


class TestWriteAndRead:
    def test_round_trip_is_equal_and_stable(self, tmp_path: Path) -> None:
        text = lockfile.dumps(LOCK)
        assert text == lockfile.dumps(LOCK) and text.startswith("# superfluid.lock")
        back = lockfile.loads(text, "superfluid.lock")
        assert back == LOCK and lockfile.dumps(back) == text
        digest = lockfile.write(tmp_path / "superfluid.lock", LOCK)
        assert digest == hashlib.sha256(text.encode()).hexdigest()
        assert lockfile.read(tmp_path / "superfluid.lock") == (LOCK, digest)
        assert [p.name for p in tmp_path.iterdir()] == ["superfluid.lock"]  # no temp file left

    def test_parsed_toml_is_the_content_and_matches_the_schema(self) -> None:
        doc = tomllib.loads(lockfile.dumps(LOCK))
        assert doc == LOCK.to_toml()
        assert schema_errors(doc, "lock") == []
        assert [e["host"] for e in doc["engine"]] == ["cuda", "cpu"]  # sorted: best kind first
        assert "abi" not in tomllib.loads(lockfile.dumps(Lock("0.1.0", (), (), (), (
            Engine(target=Target("llamacpp", "linux-x64", "cpu"), repo="ggml-org/llama.cpp", version="b11642",
                   backend="cpu", chosen_by="tested", abi=None,
                   tested=True, why="", assets=(LockedFile(name="x.tar.gz",
                                                           path="ggml-org/llama.cpp/releases/download/b11642/x.tar.gz",
                                         url="https://h/ggml-org/llama.cpp/releases/download/b11642/x.tar.gz", size=1,
                                         sha256=SHA_A,
                                         digest_source="api", checked=("api",)),), facts={"layout": "v2"}),
                                         ))))["engine"][0]

    def test_engines_sort_whatever_order_they_come_in(self) -> None:
        shuffled = Lock("0.1.0", ("basert",), ("linux-x64",), ("cuda", "cpu"), (_engine("cuda", "cuda"), _engine()))
        assert lockfile.dumps(shuffled) == lockfile.dumps(LOCK)

    def test_urls_below_a_mirror_are_the_mirrors_own(self) -> None:
        m = Mirror("https://m.test/engines/", None, None)  # type: ignore[arg-type]
        f = _file("basert-engine-linux-x64-0.4.0+local.tar.gz")
        assert mirror.url_below("https://m.test/engines/", f.path) == m.asset_url(
            "basecompute/baseRT", "v0.4.0", f.name)
        plan = LOCK.engines[1].to_plan("https://m.test/engines")
        assert plan.assets[0].url.startswith("https://m.test/engines/basecompute/baseRT/releases/download/v0.4.0/")
        assert (plan.assets[0].sha256, plan.install, plan.chosen_by, plan.abi) == (SHA_A, "0.4.0-cpu", "abi", 1)

    @pytest.mark.parametrize("url, placed", [
        (BASE + "x.tar.gz", ("basecompute/baseRT", "v0.4.0", "x.tar.gz")),
        ("http://127.0.0.1:9/mirror/basecompute/baseRT/releases/download/v0.4.0/a%2Bb.tgz",
         ("basecompute/baseRT", "v0.4.0", "a+b.tgz")),
        ("file:///srv/m/ggml-org/llama.cpp/releases/download/b11642/x", ("ggml-org/llama.cpp", "b11642", "x")),
        ("https://h/basecompute/baseRT/x.tar.gz", None),
        ("https://h/releases/download/v1/x", None),
        ("https://h/o/r/releases/download/v1/", None),
    ])
    def test_path_of_url(self, url: str, placed: tuple[str, str, str] | None) -> None:
        assert mirror.path_of_url(url) == placed


GOOD = lockfile.dumps(LOCK)


def _replace_last(text: str, old: str, new: str) -> str:
    i = text.rindex(old)
    return text[:i] + new + text[i + len(old):]


ASSET_URL = BASE + "basert-engine-linux-x64-cpu-0.4.0.tar.gz"
ASSET_PATH = "basecompute/baseRT/releases/download/v0.4.0/basert-engine-linux-x64-cpu-0.4.0.tar.gz"

#: (case, the lock's text, fragments the refusal names)
MALFORMED = [
    ("bad-toml", GOOD.replace('superfluid = "0.1.0"', "superfluid = "), ["is not valid TOML", "line 5"]),
    ("not-utf8", GOOD.encode().replace(b"0.1.0", b"\xff\xfe"), ["is not UTF-8"]),
    ("wrong-type", GOOD.replace("size = 1234", 'size = "1234"', 1),
     ["at engine[0].asset[0].size", "is not of type 'integer'"]),
    ("unknown-schema", GOOD.replace('"superfluid-lock/1"', '"superfluid-lock/2"'),
     ["at schema", "superfluid-lock/2, a version of the lock format this superfluid does not read"]),
    ("no-schema", GOOD.replace('schema = "superfluid-lock/1"\n', ""), ["at schema", "expected 'superfluid-lock/1'"]),
    ("missing-targets", GOOD.replace("[targets]", "[elsewhere]"), ["at the top level", "'targets' is a required"]),
    ("bad-digest", GOOD.replace(SHA_A, "Z" * 64, 1), ["at engine[0].asset[0].sha256", "does not match"]),
    ("unknown-kind", GOOD.replace('host = "cuda"', 'host = "tpu"'), ["at engine[0].host", "'tpu' is not one of"]),
    ("credentials", GOOD.replace(ASSET_URL.replace("cpu", "cuda"), "https://deploy:hunter2@github.com/x", 1),
     ["at engine[0].asset[0].url", "credentials"]),
    ("other-scheme", GOOD.replace(BASE, "ftp://github.com/basecompute/baseRT/releases/download/v0.4.0/", 1),
     ["at engine[0].asset[0].url", "scheme 'ftp'"]),
    ("escaping-path", GOOD.replace(ASSET_PATH, "../../../../etc/passwd", 1),
     ["at engine[1].asset[0].path", "'../../../../etc/passwd' escapes the mirror"]),
    ("absolute-path", GOOD.replace(ASSET_PATH, "/etc/passwd", 1), ["at engine[1].asset[0].path", "escapes"]),
    ("backslash-path", GOOD.replace(ASSET_PATH, ASSET_PATH.replace("v0.4.0/", "v0.4.0\\\\..\\\\"), 1),
     ["at engine[1].asset[0].path", "escapes"]),
    ("path-of-another-file", GOOD.replace(ASSET_PATH, ASSET_PATH.replace("cpu-0.4.0", "cpu-0.5.0"), 1),
     ["at engine[1].asset[0].path", "is not basecompute/baseRT/releases/download/<tag>/"]),
    ("two-engines-one-target", GOOD.replace('host = "cuda"', 'host = "cpu"'),
     ["at engine[1]", "a second engine for basert linux-x64 (cpu)"]),
    ("two-digests-one-file", _replace_last(GOOD, f'sha256 = "{SHA_B}"', f'sha256 = "{SHA_A}"'),
     ["at engine[1].evidence[0].sha256", "and engine[0].evidence[0] pins it as"]),
]


@pytest.mark.parametrize("case, text, says", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_lock_is_refused_naming_file_and_key(case: str, text: str | bytes, says: list[str]) -> None:
    with pytest.raises(BadFile) as info:
        lockfile.loads(text, "fleet/superfluid.lock")
    message = str(info.value)
    assert message.startswith("fleet/superfluid.lock"), message
    for fragment in says:
        assert fragment in message, message
    assert "hunter2" not in message


CLI_CASES = [m for m in MALFORMED if m[0] in ("bad-toml", "wrong-type", "unknown-schema", "credentials",
                                               "escaping-path")]


@pytest.mark.parametrize("case, text, says", CLI_CASES, ids=[m[0] for m in CLI_CASES])
def test_malformed_lock_through_the_cli_changes_nothing(tmp_path: Path, case: str, text: str | bytes,
                                                        says: list[str]) -> None:
    m = machine_at(tmp_path, "node")
    (m.cwd / "superfluid.lock").write_bytes(text if isinstance(text, bytes) else text.encode())
    before = sorted(p.name for p in m.cwd.iterdir())
    for argv in (["runtime", "install", "--locked"], ["lock", "--check"], ["lock"],
                 ["mirror", "sync", "engines", "--lock", "superfluid.lock"]):
        run = m.superfluid(*argv)
        assert run.code == 1, (argv, run.stderr)
        assert run.stderr.startswith("superfluid: superfluid.lock") and "Traceback" not in run.stderr, run.stderr
        for fragment in says:
            assert fragment in run.stderr
        assert "hunter2" not in run.stderr + run.stdout
    assert sorted(p.name for p in m.cwd.iterdir()) == before  # no mirror, no lock rewritten
    assert list(m.home.iterdir()) == []


def test_a_fifo_or_an_oversized_lock_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="is a FIFO, not a regular file"):  # the path is wrong: exit 2 (issue 37)
        lockfile.read(fifo)  # no writer: a blocking open would hang here
    huge = tmp_path / "huge.lock"
    huge.write_bytes(b"#" * (lockfile.MAX_BYTES + 1))
    with pytest.raises(BadFile, match="is larger than"):
        lockfile.read(huge)
    with pytest.raises(BadFile, match="does not exist"):
        lockfile.read(tmp_path / "missing.lock")


def test_a_runtime_this_superfluid_does_not_ship_is_refused_at_install(tmp_path: Path) -> None:
    m = machine_at(tmp_path, "node")
    foreign = Lock("9.0.0", ("basert", "tpurt"), ("linux-x64",), ("cpu",), (_engine(), _engine(runtime="tpurt")))
    lockfile.write(m.cwd / "superfluid.lock", foreign)
    run = m.superfluid("runtime", "install", "--locked")
    assert run.code == 1 and "names the runtime 'tpurt', which this superfluid does not ship" in run.stderr
    assert list(m.home.iterdir()) == []


@pytest.mark.parametrize(("text", "depth"), [
    ("", 0),
    ("a = 1\n", 0),
    ("a = [1, [2, [3]]]\n", 3),
    ("[[engine]]\nx = 1\n", 2),
    ('a = ["[[[[", \'{{{{\']\n', 1),
    ('a = """\n[[[[\n"""\nb = \'\'\'{{{{\'\'\'\n', 0),
    ("a = 1  # [[[[[[ a comment\n", 0),
    ("a = {b = {c = [1]}}\n", 3),
], ids=["empty", "flat", "arrays", "table-header", "in-strings", "in-multiline-strings", "in-a-comment", "inline"])
def test_toml_depth_counts_nesting_outside_strings_and_comments(text: str, depth: int) -> None:
    assert lockfile.toml_depth(text) == depth


def test_a_lock_nested_deeper_than_the_cap_never_reaches_the_toml_reader() -> None:
    with pytest.raises(BadFile, match="nests arrays or tables 100000 deep"):
        lockfile.loads("x = " + "[" * 100_000 + "]" * 100_000, "deep.lock")


@pytest.mark.parametrize("kind", ["directory", "fifo", "dev-zero"])
def test_a_lock_path_that_is_not_a_regular_file_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    if kind == "directory":
        path = str(tmp_path)
    elif kind == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    else:
        path = "/dev/zero"
    with pytest.raises(UsageError, match="not a regular file") as e:
        lockfile.read(path)
    assert path in str(e.value)
