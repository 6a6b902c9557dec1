"""``runtime/from_archive``: the one ``--from URL|PATH`` rule every planner calls — version, backend and
digest from the flags, else from what the adapter reads in the archive's name; refusals named."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from superfluid.runtime.from_archive import NameFacts, plan_from
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.planning import DigestConflict, NotInstallable, Request, Sha256

HOST = Host(os="linux", arch="x64")
PIN = Sha256("a" * 64)
OTHER = Sha256("b" * 64)
NAME = "engine-linux-x64-cuda-1.2.0.tar.gz"


def reads(facts: NameFacts) -> Callable[[str, str | None], NameFacts]:
    """An adapter's reading of a file name that answers ``facts`` for any name."""
    return lambda name, version: facts


@pytest.mark.parametrize(("request_", "facts", "expected"), [
    pytest.param(Request(id="x", from_=f"/d/{NAME}"), NameFacts(platform="linux-x64", backend="cuda", version="1.2.0"),
                 ("1.2.0", "cuda", None, "computed"), id="all-from-the-name"),
    pytest.param(Request(id="x", version="2.0", backend="vulkan", from_="/d/a.tar.gz"), NameFacts(),
                 ("2.0", "vulkan", None, "computed"), id="all-from-the-flags"),
    pytest.param(Request(id="x", from_="/d/a.tar.gz"), NameFacts(), ("custom", "cpu", None, "computed"),
                 id="nothing-said-custom-and-default-backend"),
    pytest.param(Request(id="x", from_=f"/d/{NAME}"), NameFacts(platform="linux-x64", backend="cuda", version="1.2.0",
                                                                pin=PIN),
                 ("1.2.0", "cuda", PIN, "pin"), id="pinned-by-the-recipe"),
    pytest.param(Request(id="x", from_=f"https://h.test/{NAME}", sha256=PIN), NameFacts(platform="linux-x64",
                                                                                        backend="cuda",
                                                                                        version="1.2.0"),
                 ("1.2.0", "cuda", PIN, "flag"), id="remote-with-sha256"),
])
def test_the_plan_of_an_archive(request_: Request, facts: NameFacts,
                                expected: tuple[str, str, Sha256 | None, str]) -> None:
    plan = plan_from(request_, HOST, reads(facts), default_backend="cpu")
    asset = plan.assets[0]
    assert (plan.version, plan.backend, asset.sha256, asset.digest_source) == expected
    assert (plan.chosen_by, plan.platform, asset.url) == ("from", "linux-x64", request_.from_)
    assert asset.name == (request_.from_ or "").rsplit("/", 1)[-1]


def test_tested_is_the_adapters_word_unless_untested_is_asked() -> None:
    untested = Request(id="x", from_=f"/d/{NAME}", untested=True)
    assert plan_from(Request(id="x", from_=f"/d/{NAME}"), HOST, reads(NameFacts()), default_backend="cpu").tested
    assert not plan_from(untested, HOST, reads(NameFacts()), default_backend="cpu").tested
    assert not plan_from(Request(id="x", from_=f"/d/{NAME}"), HOST, reads(NameFacts(tested=False)),
                         default_backend="cpu").tested


def test_the_facts_and_abi_the_name_carries_go_into_the_plan() -> None:
    plan = plan_from(Request(id="x", from_=f"/d/{NAME}"), HOST, reads(NameFacts(abi=2, facts={"layout": "v2"})),
                     default_backend="cpu")
    assert (plan.abi, dict(plan.facts)) == (2, {"layout": "v2"})
    assert plan.why == f"/d/{NAME}, as named (no digest given: its computed SHA-256 is recorded)"


@pytest.mark.parametrize(("request_", "facts", "error", "match"), [
    pytest.param(Request(id="x", from_=f"/d/{NAME}"), NameFacts(platform="macos-arm64"), NotInstallable,
                 "is built for macos-arm64; this is Linux x64", id="another-platform"),
    pytest.param(Request(id="x", version="1.3.0", from_=f"/d/{NAME}"), NameFacts(version="1.2.0"), UsageError,
                 "--version 1.3.0 disagrees with .*, which is version 1.2.0", id="version-disagrees"),
    pytest.param(Request(id="x", from_=f"https://h.test/{NAME}"), NameFacts(), NotInstallable,
                 "no SHA-256 to check it against", id="remote-without-a-digest"),
    pytest.param(Request(id="x", from_=f"/d/{NAME}", sha256=OTHER), NameFacts(pin=PIN), DigestConflict,
                 "disagrees with the pin", id="sha256-against-the-pin"),
])
def test_refusals(request_: Request, facts: NameFacts, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        plan_from(request_, HOST, reads(facts), default_backend="cpu")
