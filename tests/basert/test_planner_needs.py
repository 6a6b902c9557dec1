"""``runtime/basert/planner``: a release's ``<bundle>.needs.json`` (``ci/engine-assets`` writes it) judged
before the download (issue 31): a bundle this host does not meet is shown refused and skipped; a needs
asset that is not one makes the release inconsistent."""

from __future__ import annotations

import json

import pytest

from superfluid.runtime.basert.planner import plan, read_needs
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.hostfacts.needs import Needs
from superfluid.runtime.kernel.errors import InconsistentRelease
from superfluid.runtime.planning import Request, first_published
from tests.memory_listing import Asset, MemoryListing, Release

BUNDLE = "basert-engine-linux-x64-0.4.0.tar.gz"
RECIPE: dict = {"release": "https://example.invalid/v{version}/{name}", "pinned": []}
LIBS = {"libc.so.6": "/lib/libc.so.6"}


def _plans(needs: str | None, host: Host) -> tuple[list, MemoryListing]:
    assets = [Asset(BUNDLE, digest="sha256:" + "a" * 64), Asset(BUNDLE + ".sha256"), Asset("basert-engine-abi-1.txt")]
    texts = {("v0.4.0", "basert-engine-abi-1.txt"): "1\n"}
    if needs is not None:
        assets.append(Asset(BUNDLE + ".needs.json"))
        texts[("v0.4.0", BUNDLE + ".needs.json")] = needs
    listing = MemoryListing([Release("v0.4.0", tuple(assets))], texts, repo="basecompute/baseRT")
    return plan(Request(id="basert"), RECIPE, host, listing, drives=1, line="0.3"), listing


NEEDS = json.dumps({"glibc": "2.34", "glibcxx": None, "cxxabi": None, "libraries": ["libc.so.6"]})


@pytest.mark.parametrize(("host", "refused"), [
    pytest.param(Host(os="linux", arch="x64", glibc="2.36", libc="glibc", libraries=LIBS), None, id="met"),
    pytest.param(Host(os="linux", arch="x64", glibc="2.28", libc="glibc", libraries=LIBS),
                 f"{BUNDLE} needs GLIBC_2.34; this host has glibc 2.28: this build was made for a newer distribution",
                 id="rhel-8"),
    pytest.param(Host(os="linux", arch="x64", libc="musl", libraries=LIBS),
                 f"{BUNDLE} needs glibc (GLIBC_2.34); this host's C library is musl: this build is made for glibc "
                 "distributions", id="alpine"),
    pytest.param(Host(os="linux", arch="x64"), None, id="a-host-described"),
])
def test_a_bundle_s_stated_needs_are_judged_before_download(host: Host, refused: str | None) -> None:
    plans, listing = _plans(NEEDS, host)
    assert [p.install for p in plans] == ["0.4.0-cpu"]
    assert plans[0].refused == refused and plans[0].needs == Needs(glibc="2.34", libraries=("libc.so.6",))
    assert ("v0.4.0", BUNDLE + ".needs.json") in listing.read
    assert (first_published(plans) is None) is (refused is not None)


def test_a_bundle_without_a_needs_asset_is_measured_after_extraction() -> None:
    plans, _ = _plans(None, Host(os="linux", arch="x64", glibc="2.0", libc="glibc"))
    assert plans[0].needs is None and plans[0].refused is None


@pytest.mark.parametrize(("text", "fault"), [("{", "is not JSON"), ('{"glibc": 2}', "is not a needs document"),
                                             ("[]", "is not a needs document")])
def test_a_needs_asset_that_is_not_one_is_inconsistent(text: str, fault: str) -> None:
    with pytest.raises(InconsistentRelease, match=f"asset {BUNDLE}.needs.json: {fault}"):
        _plans(text, Host(os="linux", arch="x64"))
    with pytest.raises(InconsistentRelease, match=fault):
        read_needs("r", "v1", "x.needs.json", text)
