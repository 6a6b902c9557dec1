"""basert's planner (and the ``--from`` rule it calls, and the digest policy as it applies it),
table-driven on synthetic release facts served by an in-memory listing (no network, no files)."""

from __future__ import annotations

import pytest

from superfluid.runtime.basert.bundles import parse_abi_asset_name
from superfluid.runtime.basert.planner import plan, read_abi_asset
from superfluid.runtime.digests import settle_asset
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.errors import InconsistentRelease, UsageError
from superfluid.runtime.planning import DigestConflict, NotInstallable, Request, install_name
from tests.memory_listing import Asset, MemoryListing, Release

LINUX = Host(os="linux", arch="x64")
LINUX_ARM = Host(os="linux", arch="arm64")
LINUX_ARM_GPU = Host(os="linux", arch="arm64", nvidia_driver="580.95.05")
MAC = Host(os="macos", arch="arm64")
D = {c: c * 64 for c in "abcdef"}  # six distinct digests


A = Asset
R = Release


def release(version: str, abi: int | None = None, *, platforms: tuple[str, ...] = ("linux-x64",),
            sidecar: bool = True, prerelease: bool = False, digest: str | None = None) -> R:
    assets = []
    for p in platforms:
        name = f"basert-engine-{p}-{version}.tar.gz"
        assets.append(A(name, digest=digest))
        if sidecar:
            assets.append(A(name + ".sha256"))
    if abi is not None:
        assets.append(A(f"basert-engine-abi-{abi}.txt"))
    return R(f"v{version}", tuple(assets), prerelease)


def texts_for(releases: list[R], overrides: dict[tuple[str, str], str] | None = None) -> dict[tuple[str, str], str]:
    """The ABI asset contents as a well-behaved release states them, with overrides."""
    out = {}
    for r in releases:
        for a in r.assets:
            n = parse_abi_asset_name(a.name)
            if n is not None:
                out[(r.tag, a.name)] = f"{n}\n"
    out.update(overrides or {})
    return out


NO_PINS: dict = {"release": "https://example.invalid/v{version}/{name}", "pinned": []}
RECIPE = {
    "release": "https://example.invalid/v{version}/{name}",
    "pinned": [
        {"version": "0.4.0", "abi": 1, "assets": [{"name": "basert-engine-macos-arm64-0.4.0.tar.gz"},
                                                 {"name": "basert-engine-linux-arm64-cuda-0.4.0.tar.gz"}]},
        {"version": "0.3.0", "assets": [{"name": "basert-engine-macos-arm64-0.3.0.tar.gz", "size": 5, "sha256": D["c"]},
                                        {"name": "basert-engine-linux-arm64-cuda-0.3.0.tar.gz", "size": 6,
                                         "sha256": D["d"]}]},
        {"version": "0.2.6", "assets": [{"name": "basert-engine-macos-arm64-0.2.6.tar.gz", "size": 5,
                                         "sha256": D["e"]}]},
    ],
}
STANDARD = [release("0.5.0", 2), release("0.4.0", 1), release("0.3.1", 1), release("0.3.0"), release("0.2.6")]


def plans(request: Request, releases: list[R], *, host: Host = LINUX, recipe: dict = NO_PINS,
          texts: dict | None = None) -> list:
    listing = MemoryListing(releases, texts_for(releases, texts), repo="basecompute/baseRT")
    return plan(request, recipe, host, listing, drives=1, line="0.3")


def req(**kw: object) -> Request:
    return Request.parse("basert", **kw)  # type: ignore[arg-type]


# -- the choice by ABI number (SPEC §4.1) -----------------------------------------------------------

CHOICE = [
    # id, releases, request flags, expected (version, chosen_by, abi, tested)
    ("newest-abi-1-over-0.5.0", STANDARD, {}, ("0.4.0", "abi", 1, True)),
    ("0.3.1-when-no-0.4.0", [r for r in STANDARD if r.tag != "v0.4.0"], {}, ("0.3.1", "abi", 1, True)),
    ("0.3.0-by-line", [release("0.5.0", 2), release("0.3.0"), release("0.2.6")], {}, ("0.3.0", "line", None, True)),
    ("named-0.3.0", STANDARD, {"version": "0.3.0"}, ("0.3.0", "line", None, True)),
    ("named-v0.3.1", STANDARD, {"version": "v0.3.1"}, ("0.3.1", "abi", 1, True)),
    ("untested-0.5.0", STANDARD, {"version": "0.5.0", "untested": True}, ("0.5.0", "untested", 2, False)),
    ("untested-0.2.6", STANDARD, {"version": "0.2.6", "untested": True}, ("0.2.6", "untested", None, False)),
    ("untested-flag-without-version-changes-nothing", STANDARD, {"untested": True}, ("0.4.0", "abi", 1, True)),
    ("prerelease-skipped", [release("0.4.1rc1", 1, prerelease=True), *STANDARD], {}, ("0.4.0", "abi", 1, True)),
    ("prerelease-when-named", [release("0.4.1rc1", 1, prerelease=True), *STANDARD], {"version": "0.4.1rc1"},
     ("0.4.1rc1", "abi", 1, True)),
    ("unordered-listing", list(reversed(STANDARD)), {}, ("0.4.0", "abi", 1, True)),
    ("0.10.0-above-0.4.0", [*STANDARD, release("0.10.0", 1)], {}, ("0.10.0", "abi", 1, True)),
]


@pytest.mark.parametrize("releases,flags,expected", [c[1:] for c in CHOICE], ids=[c[0] for c in CHOICE])
def test_choice(releases: list[R], flags: dict, expected: tuple) -> None:
    got = plans(req(**flags), releases)
    assert len(got) == 1
    p = got[0]
    assert (p.version, p.chosen_by, p.abi, p.tested) == expected
    assert p.install == f"{expected[0]}-cpu"
    assert p.assets[0].name == f"basert-engine-linux-x64-{expected[0]}.tar.gz"
    assert p.assets[0].sidecar == f"http://mirror.test/basert-engine-linux-x64-{expected[0]}.tar.gz.sha256"


REFUSALS = [
    ("0.5.0-by-number", STANDARD, {"version": "0.5.0"}, NotInstallable,
     "baseRT 0.5.0 states ABI 2; this superfluid drives ABI 1: the newest it drives is 0.4.0: "
     "`superfluid runtime install basert --version 0.5.0 --untested` installs 0.5.0 anyway"),
    ("0.2.6-off-line", STANDARD, {"version": "0.2.6"}, NotInstallable,
     "baseRT 0.2.6 states no ABI number; this superfluid drives ABI 1, and only the unnumbered 0.3.x line "
     "carries ABI 1: the newest it drives is 0.4.0: `superfluid runtime install basert --version 0.2.6 --untested` "
     "installs 0.2.6 anyway"),
    ("nothing-driven", [release("0.5.0", 2), release("0.2.6")], {}, NotInstallable,
     "no baseRT release for linux-x64 states ABI 1 (or the unnumbered 0.3.x line), the ABI this superfluid drives: "
     "the newest is 0.5.0 (baseRT 0.5.0 states ABI 2; this superfluid drives ABI 1): "
     "`superfluid runtime install basert --version 0.5.0 --untested` installs 0.5.0 anyway"),
    ("not-published", STANDARD, {"version": "0.9.9"}, NotInstallable,
     "baseRT 0.9.9 is not published (the newest this superfluid drives here is 0.4.0)"),
    ("no-bundle-for-platform", [release("0.4.0", 1, platforms=("macos-arm64",))], {}, NotInstallable,
     "baseRT publishes no bundle for linux-x64"),
    ("backend-not-published", STANDARD, {"backend": "cuda"}, NotInstallable,
     "baseRT 0.4.0 has no cuda bundle for linux-x64 (it has: cpu)"),
    ("bad-version-flag", STANDARD, {"version": "../x"}, UsageError, "is not a version"),
    ("bad-sha256-flag", STANDARD, {"sha256": "abc"}, UsageError, "is not a SHA-256"),
]


@pytest.mark.parametrize("releases,flags,error,message", [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_refusal(releases: list[R], flags: dict, error: type, message: str) -> None:
    with pytest.raises(error) as caught:
        plans(req(**flags), releases)
    assert message in str(caught.value)


def test_refusal_names_what_installs_instead() -> None:
    with pytest.raises(NotInstallable) as caught:
        plans(req(version="0.5.0"), STANDARD)
    assert caught.value.instead == "0.4.0"


# -- a release that contradicts itself (SPEC §5.3) --------------------------------------------------

INCONSISTENT = [
    ("content-other-number", "2\n"),
    ("no-newline", "1"),
    ("two-newlines", "1\n\n"),
    ("leading-zero", "01\n"),
    ("crlf", "1\r\n"),
    ("spaces", " 1\n"),
    ("empty", ""),
    ("words", "ABI 1\n"),
]


@pytest.mark.parametrize("content", [c[1] for c in INCONSISTENT], ids=[c[0] for c in INCONSISTENT])
def test_inconsistent_abi_asset_refused_when_named(content: str) -> None:
    bad = release("0.6.0", 1)
    with pytest.raises(InconsistentRelease) as caught:
        plans(req(version="0.6.0"), [bad, *STANDARD], texts={("v0.6.0", "basert-engine-abi-1.txt"): content})
    assert "basert-engine-abi-1.txt" in str(caught.value)
    assert "v0.6.0" in str(caught.value)


@pytest.mark.parametrize("content", [c[1] for c in INCONSISTENT], ids=[c[0] for c in INCONSISTENT])
def test_inconsistent_release_never_chosen(content: str) -> None:
    bad = release("0.6.0", 1)
    got = plans(req(), [bad, *STANDARD], texts={("v0.6.0", "basert-engine-abi-1.txt"): content})
    assert got[0].version == "0.4.0"


def test_two_abi_assets_disagreeing() -> None:
    bad = R("v0.6.0", (*release("0.6.0", 1).assets, A("basert-engine-abi-2.txt")))
    with pytest.raises(InconsistentRelease, match="different numbers"):
        plans(req(version="0.6.0"), [bad])


def test_abi_asset_against_pin() -> None:
    listed = release("0.4.0", 2, platforms=("macos-arm64",))
    with pytest.raises(InconsistentRelease, match="pins it as ABI 1"):
        plans(req(version="0.4.0"), [listed], host=MAC, recipe=RECIPE)


@pytest.mark.parametrize("text,expected", [("1\n", 1), ("2\n", 2), ("10\n", 10), ("0\n", 0)])
def test_read_abi_asset(text: str, expected: int) -> None:
    assert read_abi_asset("r", "v1", f"basert-engine-abi-{expected}.txt", text) == expected


# -- pins, platforms and backends ---------------------------------------------------------------------


def test_pin_without_listing_has_its_abi_but_needs_a_digest() -> None:
    # 0.4.0 is pinned with ABI 1 but no digest: not listed, nothing states one -> refused, not guessed
    with pytest.raises(NotInstallable, match="no pin names its digest"):
        plans(req(), [], host=MAC, recipe=RECIPE)


def test_pinned_digest_from_recipe_when_not_listed() -> None:
    got = plans(req(version="0.3.0"), [], host=MAC, recipe=RECIPE)
    a = got[0].assets[0]
    assert (got[0].chosen_by, a.sha256, a.digest_source, a.size) == ("pin", D["c"], "pin", 5)
    assert a.url == "http://mirror.test/v0.3.0/basert-engine-macos-arm64-0.3.0.tar.gz"  # where the source has it
    assert got[0].backend == "metal" and got[0].install == "0.3.0-metal"
    # without a listing (the worker's plan), at the recipe's URL, digests of unpinned bundles provisional
    alone = plan(req(), RECIPE, MAC, None, drives=1, line="0.3")
    assert [(p.install, p.assets[0].url, p.assets[0].sha256) for p in alone] == [
        ("0.4.0-metal", "https://example.invalid/v0.4.0/basert-engine-macos-arm64-0.4.0.tar.gz", None)]


def test_pin_abi_chooses_listed_release_without_abi_asset() -> None:
    listed = release("0.4.0", None, platforms=("macos-arm64",))
    got = plans(req(), [listed], host=MAC, recipe=RECIPE)
    assert (got[0].version, got[0].chosen_by, got[0].abi) == ("0.4.0", "pin", 1)


def test_pinned_digest_must_match_listing() -> None:
    listed = release("0.3.0", None, platforms=("macos-arm64",), digest="sha256:" + D["f"])
    with pytest.raises(InconsistentRelease, match=D["f"]):
        plans(req(version="0.3.0"), [listed], host=MAC, recipe=RECIPE)


def test_pinned_0_2_6_is_untested_only() -> None:
    with pytest.raises(NotInstallable, match="--version 0.2.6 --untested` installs 0.2.6 anyway"):
        plans(req(version="0.2.6"), [], host=MAC, recipe=RECIPE)
    got = plans(req(version="0.2.6", untested=True), [], host=MAC, recipe=RECIPE)
    assert (got[0].chosen_by, got[0].tested, got[0].assets[0].sha256) == ("untested", False, D["e"])


def test_cuda_needs_a_driver() -> None:
    rels = [release("0.4.0", 1, platforms=("linux-arm64-cuda",))]
    with pytest.raises(NotInstallable, match="needs an NVIDIA driver"):
        plans(req(), rels, host=LINUX_ARM)
    assert plans(req(), rels, host=LINUX_ARM_GPU)[0].install == "0.4.0-cuda"
    assert plans(req(backend="cuda"), rels, host=LINUX_ARM)[0].install == "0.4.0-cuda"


def test_plans_ordered_by_backend_rank() -> None:
    rels = [release("0.4.0", 1, platforms=("linux-arm64", "linux-arm64-cuda"))]
    got = plans(req(), rels, host=LINUX_ARM_GPU)
    assert [p.backend for p in got] == ["cuda", "cpu"]


def test_abi_assets_read_only_for_this_platform() -> None:
    rels = [release("0.4.0", 1), release("0.9.0", 3, platforms=("macos-arm64",))]
    listing = MemoryListing(rels, texts_for(rels))
    plan(req(), NO_PINS, LINUX, listing, drives=1, line="0.3")
    assert listing.read == [("v0.4.0", "basert-engine-abi-1.txt")]


def test_settle_reads_the_sidecar() -> None:
    rels = [release("0.4.0", 1, digest="sha256:" + D["a"])]
    asset = plans(req(), rels)[0].assets[0]
    assert (asset.sha256, asset.digest_source) == (D["a"], "release")
    name = asset.name
    settled = settle_asset(asset, f"{D['a']}  {name}\n")
    assert (settled.sha256, settled.checked, settled.sidecar) == (D["a"], ("release", "api"), None)
    with pytest.raises(InconsistentRelease, match="the listing's digest"):
        settle_asset(asset, f"{D['b']}  {name}\n")
    # listed but not readable: refused, never settled on the listing's digest alone
    with pytest.raises(InconsistentRelease, match="could not be read"):
        settle_asset(asset, None)


def test_basert_bundle_needs_its_sha256() -> None:
    rels = [release("0.4.0", 1, sidecar=False, digest="sha256:" + D["a"])]
    with pytest.raises(NotInstallable, match="publishes no basert-engine-linux-x64-0.4.0.tar.gz.sha256"):
        plans(req(), rels)
    got = plans(req(sha256=D["a"]), rels)[0].assets[0]
    assert (got.sha256, got.digest_source, got.checked) == (D["a"], "flag", ("flag", "api"))


# -- --from ----------------------------------------------------------------------------------------------

FROM = [
    ("local-no-digest", {"from_": "/tmp/basert-engine-linux-x64-0.4.0.tar.gz"},
     ("0.4.0", "cpu", None, "computed")),
    ("local-with-digest", {"from_": "/tmp/basert-engine-linux-x64-0.4.0.tar.gz", "sha256": D["a"]},
     ("0.4.0", "cpu", D["a"], "flag")),
    ("custom-name", {"from_": "/tmp/engine.tar.gz"}, ("custom", "cpu", None, "computed")),
    ("version-flag", {"from_": "/tmp/engine.tar.gz", "version": "0.4.0"}, ("0.4.0", "cpu", None, "computed")),
    ("url-with-digest", {"from_": "https://x.test/a/basert-engine-linux-x64-0.3.1.tar.gz", "sha256": D["b"]},
     ("0.3.1", "cpu", D["b"], "flag")),
]


@pytest.mark.parametrize("flags,expected", [c[1:] for c in FROM], ids=[c[0] for c in FROM])
def test_from(flags: dict, expected: tuple) -> None:
    p = plans(req(**flags), [])[0]
    assert (p.version, p.backend, p.assets[0].sha256, p.assets[0].digest_source) == expected
    assert p.chosen_by == "from" and p.abi is None and p.assets[0].url == flags["from_"]


def test_from_pinned_name_uses_pin() -> None:
    p = plans(req(from_="/m/basert-engine-macos-arm64-0.3.0.tar.gz"), [], host=MAC, recipe=RECIPE)[0]
    assert (p.assets[0].sha256, p.assets[0].digest_source) == (D["c"], "pin")
    with pytest.raises(DigestConflict):
        plans(req(from_="/m/basert-engine-macos-arm64-0.3.0.tar.gz", sha256=D["a"]), [], host=MAC, recipe=RECIPE)


@pytest.mark.parametrize("flags,error,fragment", [
    ({"from_": "https://x.test/basert-engine-linux-x64-0.4.0.tar.gz"}, NotInstallable, "no SHA-256"),
    ({"from_": "/m/basert-engine-macos-arm64-0.4.0.tar.gz"}, NotInstallable, "built for macos-arm64"),
    ({"from_": "/m/basert-engine-linux-x64-0.4.0.tar.gz", "version": "0.3.1"}, UsageError, "disagrees"),
])
def test_from_refused(flags: dict, error: type, fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        plans(req(**flags), [])


# -- small rules --------------------------------------------------------------------------------------------

def test_install_name_refuses_odd_names() -> None:
    assert install_name("0.4.0", "cpu") == "0.4.0-cpu"
    with pytest.raises(UsageError):
        install_name(".hidden", "cpu")
    with pytest.raises(UsageError):
        install_name("a/b", "cpu")


def test_plan_json_shape() -> None:
    p = plans(req(), STANDARD)[0].to_json()
    assert list(p)[:9] == ["id", "version", "backend", "install", "assets", "tested", "chosen_by", "abi", "why"]
    assert set(p["assets"][0]) >= {"name", "url", "sha256", "size", "digest_source"}
