"""``runtime install basert`` downloading and extracting in one pass, under faults (issue 13).

The install runs in process (``installer.install.install``, the function the command calls) against
the loopback server, with the real staged worker as its probe, so that a test can hold the fetch
limits (no retry) and watch the staging directory as the bytes arrive: a ``Progress`` that looks
into ``.staging-*/.stream-*`` proves the extraction was under way when the fault struck. Then
nothing may be published, no staging directory may be left, and the cache may hold no partial
download and no blob of the bundle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, VerificationError
from superfluid.installer.install import Outcome, Reporter, install
from superfluid.installer.phases import Phases
from superfluid.installer.sources.choose import source_for
from superfluid.installer.transport.progress import Progress
from superfluid.runtime.planning import Request
from tests.end_to_end import releases
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer
from tests.settings_from import settings_from

REPO = releases.REPO
PADDING = 48 << 20  # far more than the pipeline holds between the socket and the tar reader (~10 MB)


@pytest.fixture(scope="module")
def big_bundle(engines: Path) -> bytes:
    """The 0.4.0 bundle with 48 MiB of incompressible padding (built once)."""
    return releases.bundle("0.4.0", padding=PADDING)


@pytest.fixture
def big(big_bundle: bytes, engines: Path) -> Iterator[ReleaseServer]:
    """The loopback server with 0.3.1 (as released) and 0.4.0 (with the big bundle)."""
    with ReleaseServer() as s:
        releases.publish(s, [("0.3.1", 1)])
        assets = releases.release_assets("0.4.0", 1)
        assets[releases.bundle_name("0.4.0")] = big_bundle
        s.add_release(REPO, "v0.4.0", assets, sha256_files=True)
        yield s


class Watch(Progress):
    """Once ``after`` bytes arrived, notes what the streaming extraction has written so far."""

    def __init__(self, home: Home, after: int) -> None:
        self.home, self.after = home, after
        self.received = 0
        self.seen: set[str] = set()

    def advance(self, name: str, n: int) -> None:
        self.received += n
        if self.received >= self.after:
            self.seen.update(p.name for p in self.home.basert.glob(".staging-*/.stream-*/*"))


def _install(home: Home, server: ReleaseServer, progress: Progress | None = None,
             phases: Phases | None = None) -> Outcome:
    source = source_for(settings_from(home.env, mirror=server.mirror_url, offline=False, config=FetchConfig(retries=0,
                                                                                                            stall_timeout=10)))
    return install(Request.parse("basert"), settings_from(home.env), Reporter(progress=progress, phases=phases),
                   source=source)


def _nothing_published(home: Home, data: bytes, *, kept: int = 0) -> None:
    """Nothing installed or cached of ``data``; ``kept`` bytes of it in its partial download (those
    received before a cut, for the next run to resume: issue 42, item 31), or no partial at all."""
    assert home.installs() == ["0.3.1-cpu"] and home.current() == "0.3.1-cpu"
    assert home.receipt("0.3.1-cpu")["version"] == "0.3.1"
    assert home.leftovers() == []  # no .staging-*, hence no .stream-* inside one
    partial = home.path / "cache" / "partial"
    if kept:
        (got,) = partial.glob("*.partial")
        assert got.stat().st_size == kept and got.read_bytes()[:4096] == data[:4096]
    else:
        assert {p.suffix for p in partial.iterdir()} <= {".lock"}  # no .partial, no .json record
    assert not (home.path / "cache" / "sha256" / hashlib.sha256(data).hexdigest()).exists()


@pytest.fixture
def old(cli_home: Home, big: ReleaseServer) -> Home:
    """A home where 0.3.1 is installed and current."""
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", big.mirror_url, "--version", "0.3.1")
    assert run.code == 0, run.stderr
    return cli_home


def test_a_body_cut_while_extracting_publishes_nothing(old: Home, big: ReleaseServer, big_bundle: bytes) -> None:
    name = releases.bundle_name("0.4.0")
    cut = len(big_bundle) - (4 << 20)
    big.fault(big.mirror_path(REPO, "v0.4.0", name), "cut", after=cut)
    watch = Watch(old, after=cut - (8 << 20))
    with pytest.raises(DownloadError, match=f"after {cut} bytes"):
        _install(old, big, progress=watch)
    assert {"libbaseRT.so", "LICENSE", "kernels.bin"} <= watch.seen, "the extraction was not under way"
    _nothing_published(old, big_bundle, kept=cut)


def test_bytes_of_another_digest_while_extracting_publish_nothing(old: Home, big: ReleaseServer,
                                                                  big_bundle: bytes) -> None:
    name = releases.bundle_name("0.4.0")
    big.fault(big.mirror_path(REPO, "v0.4.0", name), "wrong_bytes", after=len(big_bundle) - 100_000)
    watch = Watch(old, after=len(big_bundle) - (8 << 20))
    with pytest.raises(VerificationError) as info:
        _install(old, big, progress=watch)
    assert info.value.expected == hashlib.sha256(big_bundle).hexdigest()
    assert {"libbaseRT.so", "LICENSE", "kernels.bin"} <= watch.seen, "the extraction was not under way"
    _nothing_published(old, big_bundle)


def test_one_pass_install_records_its_phases(old: Home, big: ReleaseServer, big_bundle: bytes) -> None:
    phases = Phases()
    outcome = _install(old, big, phases=phases)
    assert old.installs() == ["0.3.1-cpu", "0.4.0-cpu"] and old.current() == "0.4.0-cpu"
    assert (old.basert / "0.4.0-cpu" / "lib" / "kernels.bin").stat().st_size == PADDING
    assert outcome.receipt is not None and outcome.receipt.sources[0].sha256 == hashlib.sha256(big_bundle).hexdigest()
    assert old.leftovers() == []
    spans = {n: (s, e) for n, s, e in phases.spans()}
    assert list(spans) == ["listing", "download", "extract", "probe", "publish"]
    assert spans["extract"][0] < spans["download"][1] <= spans["probe"][0]  # overlapped, verified before the probe
    assert spans["probe"][1] <= spans["publish"][0]
    assert {p.suffix for p in (old.path / "cache" / "partial").iterdir()} == {".lock"}


def test_timings_are_recorded_when_asked(cli_home: Home, big: ReleaseServer) -> None:
    from superfluid.runtime.kernel.schema import errors as schema_errors

    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", big.mirror_url, "--version", "0.3.1",
                              "--json", "--timings")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "install-result") == []
    phases = [t["phase"] for t in doc["timings"]]
    assert phases[:2] == ["start", "listing"] and phases[-2:] == ["probe", "publish"]
    assert {"download", "extract"} <= set(phases)
    assert all(t["seconds"] >= 0 and t["end"] >= t["start"] for t in doc["timings"])
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", big.mirror_url, "--version", "0.3.1",
                              "--dry-run", "--timings")
    assert run.code == 0 and "superfluid: timing listing" in run.stderr and "timing download" not in run.stderr
    plain = cli_home.superfluid("runtime", "install", "basert", "--mirror", big.mirror_url, "--dry-run", "--json")
    assert "timings" not in plain.json()
