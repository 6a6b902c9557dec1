"""What an install tells while it runs (installer/events.py): one record per kind, each said in its own words."""

from __future__ import annotations

import dataclasses

import pytest

from superfluid.install_report import event_lines
from superfluid.installer.events import FellBack, Trying, Unchecked, Waiting, Warned
from superfluid.runtime.planning import Plan, PlanAsset


def _plan(tested: bool = True) -> Plan:
    return Plan(id="basert", version="0.4.0", backend="cpu", platform="linux-x64", chosen_by="abi", tested=tested,
                abi=1, why="ABI 1, as this superfluid drives",
                assets=(PlanAsset(name="b.tar.gz", url="https://user:pw@h/b.tar.gz", sha256="a" * 64, size=3 << 20,
                                  digest_source="pin"),))


@pytest.mark.parametrize(("event", "first_line"), [
    pytest.param(Trying(plan=_plan(), index=0), "installing basert 0.4.0-cpu: ABI 1, as this superfluid drives",
                 id="trying-first"),
    pytest.param(Trying(plan=_plan(tested=False), index=1), "  then, if it does not run: basert 0.4.0-cpu",
                 id="trying-next-untested"),
    pytest.param(FellBack(plan=_plan(), index=0, reason="its GPU is not here"),
                 "basert 0.4.0-cpu does not run here (its GPU is not here); falling back to the next", id="fell-back"),
    pytest.param(FellBack(plan=_plan(), index=0, reason="b.tar.gz is not in this release"),
                 "basert 0.4.0-cpu: b.tar.gz is not in this release; falling back to the next", id="fell-back-absent"),
    pytest.param(Unchecked(plan=_plan(), path="/x/b.tar.gz", sha256="b" * 64),
                 "warning: /x/b.tar.gz has no SHA-256 to check it against", id="unchecked"),
    pytest.param(Waiting(plan=_plan(), holder="pid 7 on h"),
                 "another install of basert is running (pid 7 on h); waiting for it", id="waiting"),
    pytest.param(Warned(reason="a listing entry was skipped"), "warning: a listing entry was skipped", id="warned"),
])
def test_each_event_is_said_in_its_words(event: object, first_line: str) -> None:
    lines = event_lines(event)  # type: ignore[arg-type]
    assert lines[0].startswith(first_line)


def test_a_tried_plan_names_where_each_asset_comes_from_without_credentials() -> None:
    fetched = event_lines(Trying(plan=_plan(), index=0))
    cached = event_lines(Trying(plan=_plan(), index=0, cached=("b.tar.gz",)))
    assert fetched[1] == "  from https://h/b.tar.gz"
    assert cached[1].startswith("  from the download cache")
    assert "pw" not in "".join(fetched + cached)
    assert "(UNTESTED with this superfluid)" in event_lines(Trying(plan=_plan(tested=False), index=0))[0]


def test_an_event_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Warned(reason="x").reason = "y"  # type: ignore[misc]
