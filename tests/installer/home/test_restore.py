"""``installer/restore``: what a receipt must record to be put back, the plan that fetches exactly
its archives (below a mirror too), and real restores of a real reference-engine install whose files
were changed: from the cache or the file it came from, never a connection offline, nothing changed
when the archives do not make the recorded files."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from superfluid.installer.errors import OfflineMissing
from superfluid.installer.home.installs import runtime_root
from superfluid.installer.home.restore import NotRestorable, mirror_of, plan_of, restore, unrestorable
from superfluid.installer.install import install
from superfluid.runtime.kernel.receipt import Receipt, Source, read_receipt
from superfluid.runtime.kernel.record import FILES, files_of
from superfluid.runtime.planning import Request
from tests.conftest import Home
from tests.installer.archives import snapshot
from tests.settings_from import settings_from

SHA = "ab" * 32
URL = "https://github.example/basecompute/baseRT/releases/download/v0.4.0/basert-engine-linux-x64-0.4.0.tar.gz"


def bare(**kw: object) -> Receipt:
    fields: dict[str, object] = dict(id="basert", install="0.4.0-cpu", version="0.4.0", backend="cpu",
                                     worker="bin/superfluid-worker-basert", sources=(Source(URL, SHA),), tested=True,
                                     abi=1, chosen_by="tested", platforms=("linux-x64",),
                                     extra={FILES: [{"path": "lib/x", "kind": "file", "size": 1, "sha256": SHA}]})
    fields.update(kw)
    return Receipt(**fields)  # type: ignore[arg-type]


# --- what a receipt must say (pure) ---------------------------------------------------------------------

@pytest.mark.parametrize(("receipt", "why"), [
    pytest.param(bare(), None, id="enough"),
    pytest.param(bare(extra={}), "its receipt records no files", id="no-files"),
    pytest.param(bare(sources=()), "its receipt records no source", id="no-source"),
    pytest.param(bare(sources=(Source(URL, SHA), Source("file:///m/x.tar.gz", ""))),
                 "its receipt records no SHA-256 of file:///m/x.tar.gz", id="a-source-without-a-digest"),
])
def test_unrestorable(receipt: Receipt, why: str | None) -> None:
    assert unrestorable(receipt) == why


@pytest.mark.parametrize(("url", "mirror", "want"), [
    pytest.param(URL, None, URL, id="where-it-came-from"),
    pytest.param(URL, "https://mirror.example/m/",
                 "https://mirror.example/m/basecompute/baseRT/releases/download/v0.4.0/basert-engine-linux-x64-0.4.0.tar.gz",
                 id="the-same-path-below-the-mirror"),
    pytest.param("/home/u/engine.tar.gz", "https://mirror.example/m/", "/home/u/engine.tar.gz",
                 id="a-local-file-stays"),
])
def test_plan_of_fetches_each_source_by_its_digest(url: str, mirror: str | None, want: str) -> None:
    p = plan_of(bare(sources=(Source(url, SHA),)), mirror_root=mirror)
    (a,) = p.assets
    assert (a.url, a.sha256, a.digest_source, a.name) == (want, SHA, "pin", url.rsplit("/", 1)[-1])
    assert (p.id, p.install, p.abi, p.tested, p.chosen_by, p.platform) == ("basert", "0.4.0-cpu", 1, True, "tested",
                                                                           "linux-x64")


WEB = "https://github.example"
BELOW = "/basecompute/baseRT/releases/download/v0.4.0/basert-engine-linux-x64-0.4.0.tar.gz"


@pytest.mark.parametrize(("receipt", "want"), [
    pytest.param(bare(extra={"mirror": "https://m.example/r/"}), "https://m.example/r/", id="recorded"),
    pytest.param(bare(sources=(Source("https://cdn.example/x/e.tar.gz", SHA),), extra={"mirror": "file:///srv/m/"}),
                 "file:///srv/m/", id="recorded-whatever-the-urls-say"),
    pytest.param(bare(extra={"mirror": "oci://r.example/fleet/engines/"}), None, id="a-registry-is-no-root-to-read"),
    pytest.param(bare(chosen_by="from", extra={"mirror": "https://m.example/r/"}), None, id="from"),
    pytest.param(bare(), None, id="githubs-downloads"),
    pytest.param(bare(sources=(Source("https://m.example/r" + BELOW, SHA),)), "https://m.example/r/",
                 id="before-it-was-recorded-the-urls-say-it"),
    pytest.param(bare(sources=(Source("https://m.example/r" + BELOW, SHA), Source("https://n.example" + BELOW, SHA))),
                 None, id="before-it-was-recorded-two-roots"),
    pytest.param(bare(sources=(Source("/home/u/engine.tar.gz", SHA),)), None, id="a-local-file"),
])
def test_mirror_of_is_what_the_receipt_records(receipt: Receipt, want: str | None) -> None:
    assert mirror_of(receipt, github_web=WEB) == want


def test_plan_of_an_unchosen_receipt_is_from() -> None:
    assert plan_of(bare(chosen_by=None, platforms=())).chosen_by == "from"


# --- real restores ----------------------------------------------------------------------------------------

@pytest.fixture
def restorable(bundles: dict[str, Path], tmp_path: Path, cli_home: Home) -> tuple[dict[str, str], Receipt, Path]:
    """basert 0.4.0 installed from a copy of its bundle (hashed in place; the cache's copy of it dropped)."""
    local = tmp_path / "from" / bundles["0.4.0"].name
    local.parent.mkdir()
    shutil.copy(bundles["0.4.0"], local)
    env = cli_home.env
    sha = hashlib.sha256(local.read_bytes()).hexdigest()
    done = install(Request.parse("basert", from_=str(local), sha256=sha), settings_from(env))
    assert done.receipt is not None and done.path is not None
    kept = Path(env["SUPERFLUID_HOME"]) / "cache" / "sha256" / sha
    assert kept.is_file()  # a checked local archive is kept in the cache (issue 42, item 30)
    kept.unlink()
    return env, read_receipt(Path(done.path) / "runtime.json"), local


def _spoil(install_dir: Path) -> Path:
    lib = next(p for p in (install_dir / "lib").iterdir() if p.name.startswith("libbaseRT"))
    lib.write_bytes(b"not the engine any more")
    (install_dir / "lib" / "stray").write_text("added")
    return lib


def test_a_changed_install_is_put_back_as_its_receipt_records(restorable: tuple[dict[str, str], Receipt, Path]) -> None:
    env, receipt, _ = restorable
    install_dir = runtime_root(env["SUPERFLUID_HOME"], "basert") / receipt.install
    before = {r.path: r for r in files_of(receipt) or ()}
    _spoil(install_dir)
    done = restore(receipt, settings_from(env))
    assert done.path == install_dir and done.replaced
    again = read_receipt(install_dir / "runtime.json")
    assert (again.sources, again.installed_at, again.chosen_by) == (receipt.sources, receipt.installed_at,
                                                                    receipt.chosen_by)
    assert not (install_dir / "lib" / "stray").exists()
    assert {r.path: r for r in files_of(again) or ()} == before


def test_offline_with_nothing_cached_opens_no_connection(restorable: tuple[dict[str, str], Receipt, Path]) -> None:
    env, receipt, _ = restorable
    remote = replace(receipt, sources=(Source("https://192.0.2.1/o/r/releases/download/v1/x.tar.gz",
                                                          receipt.sources[0].sha256),))
    with pytest.raises(OfflineMissing) as e:
        restore(remote, settings_from(env, offline=True))
    (fix,) = e.value.fixes
    assert fix.argv == ("superfluid", "runtime", "repair", "basert", receipt.install)
    assert fix.does.startswith("fills the cache")  # the face never adds --offline to it


def _lying(receipt: Receipt, bundles: dict[str, Path], _local: Path) -> Receipt:
    """The receipt naming another release's bundle as its source (its digest right for that file)."""
    other = bundles["0.3.1"]
    return replace(receipt, sources=(Source(str(other), hashlib.sha256(other.read_bytes()).hexdigest()),))


def _gone(receipt: Receipt, _bundles: dict[str, Path], local: Path) -> Receipt:
    """The receipt as it is, the file it was installed from deleted (and not in the cache)."""
    local.unlink()
    return receipt


def _silent(receipt: Receipt, _bundles: dict[str, Path], _local: Path) -> Receipt:
    return replace(receipt, sources=())


@pytest.mark.parametrize(("make", "fragment"), [
    pytest.param(_gone, "is gone", id="the-file-it-came-from-gone"),
    pytest.param(_lying, "do not make the files it records", id="archives-that-do-not-make-the-recorded-files"),
    pytest.param(_silent, "records no source", id="a-receipt-that-says-too-little"),
])
def test_a_refused_restore_changes_nothing(restorable: tuple[dict[str, str], Receipt, Path], bundles: dict[str, Path],
                                           make: Callable[[Receipt, dict[str, Path], Path], Receipt],
                                           fragment: str) -> None:
    env, receipt, local = restorable
    root = runtime_root(env["SUPERFLUID_HOME"], "basert")
    _spoil(root / receipt.install)
    asked = make(receipt, bundles, local)
    before = snapshot(root)
    with pytest.raises(NotRestorable, match=fragment):
        restore(asked, settings_from(env))
    assert snapshot(root) == before
