"""The baseRT ABI rule (``runtime/basert/abi.py``), and the three callers that must agree with it:
the loader's verdict on a library, the planner's choice of a release and ``versions``' verdict on a
pin, each asked through its own entry point over the same matrix."""

from __future__ import annotations

import pytest

from superfluid.runtime.basert.abi import abi_verdict
from superfluid.runtime.basert.adapter import BasertAdapter
from superfluid.runtime.basert.planner import plan
from superfluid.runtime.basert.verdict import Probe, judge
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.planning import NotInstallable, Request
from tests.memory_listing import Asset, MemoryListing, Release

#: (version, stated ABI, driven by) for a superfluid driving ABI 1 whose unnumbered line is 0.3
MATRIX = [
    pytest.param("0.4.0", 1, "abi", id="our-abi"),
    pytest.param("0.9.9", 1, "abi", id="our-abi-whatever-the-version"),
    pytest.param("0.5.0", 2, None, id="other-abi"),
    pytest.param("0.3.1", 2, None, id="numbered-on-the-line-other-abi"),
    pytest.param("0.3.0", None, "line", id="unnumbered-on-the-line"),
    pytest.param("0.3.7", None, "line", id="unnumbered-patch-on-the-line"),
    pytest.param("0.03.2", None, "line", id="unnumbered-line-not-normalised"),
    pytest.param("0.2.6", None, None, id="unnumbered-off-the-line"),
    pytest.param("0.4.0", None, None, id="unnumbered-later"),
    pytest.param("1.3.0", None, None, id="unnumbered-other-major"),
]
LINUX = Host(os="linux", arch="x64")


@pytest.mark.parametrize(("version", "abi", "by"), MATRIX)
def test_the_rule(version: str, abi: int | None, by: str | None) -> None:
    rule = abi_verdict(version, abi, drives=1, line="0.3")
    assert (rule.by, rule.is_driven) == (by, by is not None)


@pytest.mark.parametrize(("version", "abi", "short"), [
    ("0.4.0", 1, "ABI 1"),
    ("0.5.0", 2, "ABI 2; this superfluid drives ABI 1"),
    ("0.3.0", None, "unnumbered, of ABI 1's 0.3 line"),
    ("0.2.6", None, "unnumbered 0.2.6, not of the 0.3 line; this superfluid drives ABI 1"),
])
def test_short_words(version: str, abi: int | None, short: str) -> None:
    assert abi_verdict(version, abi, drives=1, line="0.3").short == short


def test_no_unnumbered_line_drives_no_unnumbered_library() -> None:
    rule = abi_verdict("0.3.0", None, drives=2, line=None)
    assert not rule.is_driven and "no unnumbered release carries ABI 2" in rule.why


def _loader_serves(version: str, abi: int | None) -> bool:
    probe = Probe(path="/x/libbaseRT.so", version=version, abi=abi, has_into=True)
    return judge(probe, 1792, drives=1, line="0.3").serves


def _planner_chooses(version: str, abi: int | None) -> str | None:
    bundle = f"basert-engine-linux-x64-{version}.tar.gz"
    assets = [Asset(bundle), Asset(f"{bundle}.sha256")]
    if abi is not None:
        assets.append(Asset(f"basert-engine-abi-{abi}.txt"))
    rel = Release(f"v{version}", tuple(assets))
    texts = {(rel.tag, a.name): f"{abi}\n" for a in assets if a.name.startswith("basert-engine-abi-")}
    listing = MemoryListing([rel], texts)
    try:
        return plan(Request(id="basert"), {"pinned": []}, LINUX, listing, drives=1, line="0.3")[0].chosen_by
    except NotInstallable:
        return None


def _versions_drives(version: str, abi: int | None) -> bool:
    from superfluid.runtime.basert import header

    assert (header.ABI_VERSION, header.UNNUMBERED_LINE) == (1, "0.3")  # the matrix is for our header
    adapter = BasertAdapter()
    pin = {"version": version, "assets": [{"name": f"basert-engine-linux-x64-{version}.tar.gz",
                                           "platform": "linux-x64", "backend": "cpu"}]}
    if abi is not None:
        pin["abi"] = abi
    adapter.__dict__["recipe"] = {"platforms": {"linux-x64": {"backend": "cpu"}}, "pinned": [pin]}
    (row,) = adapter.versions(LINUX, ())
    return row["tested"] is True and row["installs"] is True


@pytest.mark.parametrize(("version", "abi", "by"), MATRIX)
def test_loader_planner_and_versions_agree(version: str, abi: int | None, by: str | None) -> None:
    driven = by is not None
    assert _loader_serves(version, abi) is driven
    assert _planner_chooses(version, abi) == by
    assert _versions_drives(version, abi) is driven
