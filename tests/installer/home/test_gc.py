"""What ``runtime gc`` keeps (installer/home/gc.py ``choose``): a table of installs, each case naming what
stays (and why) and what goes; then ``collect`` on a home made by ``install_staged``."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.installer.home.gc import Candidate, choose, collect
from superfluid.installer.home.installs import current_install, list_installs, runtime_root
from superfluid.installer.home.publish import install_staged
from superfluid.installer.home.store import pin
from superfluid.runtime.hostfacts.system import host_platform
from superfluid.runtime.kernel.layout import worker_path
from superfluid.runtime.kernel.receipt import Receipt, Source


def c(name: str, at: str = "2026-01-01T00:00:00Z") -> Candidate:
    return Candidate(name, name.split("-")[0], at)


THREE = [c("0.3.0-cpu"), c("0.3.1-cpu"), c("0.4.0-cpu")]

#: (installs, keywords of choose, kept, removed)
CASES = [
    pytest.param(THREE, dict(keep=1, current="0.4.0-cpu"), ["0.4.0-cpu"], ["0.3.0-cpu", "0.3.1-cpu"], id="keep-1"),
    pytest.param(THREE, dict(keep=2, current="0.4.0-cpu"), ["0.3.1-cpu", "0.4.0-cpu"], ["0.3.0-cpu"], id="keep-2"),
    pytest.param(THREE, dict(keep=5), ["0.3.0-cpu", "0.3.1-cpu", "0.4.0-cpu"], [], id="fewer-than-keep"),
    pytest.param(THREE, dict(keep=0, current="0.4.0-cpu"), ["0.4.0-cpu"], ["0.3.0-cpu", "0.3.1-cpu"],
                 id="keep-0-still-keeps-current"),
    pytest.param(THREE, dict(keep=1, current="0.3.1-cpu", pinned="0.3.1-cpu"), ["0.3.1-cpu", "0.4.0-cpu"],
                 ["0.3.0-cpu"], id="pinned-stays"),
    pytest.param(THREE, dict(keep=1, current="0.4.0-cpu", locked={"0.3.0-cpu": "fleet.lock"}),
                 ["0.3.0-cpu", "0.4.0-cpu"], ["0.3.1-cpu"], id="named-by-a-lock-stays"),
    pytest.param([*THREE, Candidate("0.2.0-cpu", None)], dict(keep=1, current="0.4.0-cpu"),
                 ["0.2.0-cpu", "0.4.0-cpu"], ["0.3.0-cpu", "0.3.1-cpu"], id="a-broken-install-is-never-collected"),
    pytest.param([c("b11284-cpu"), c("b11642-cpu"), c("b9000-cpu")], dict(keep=1), ["b11642-cpu"],
                 ["b11284-cpu", "b9000-cpu"], id="newest-by-version-not-by-name"),
    pytest.param([c("0.4.0-cpu", "2026-01-01T00:00:00Z"), c("0.4.0-vulkan", "2026-02-01T00:00:00Z")], dict(keep=1),
                 ["0.4.0-vulkan"], ["0.4.0-cpu"], id="same-version-newest-installed-first"),
    pytest.param([], dict(keep=1), [], [], id="nothing-installed"),
    pytest.param([c("0.4.0-cpu"), Candidate("0.5.0-cpu", "0.5.0", tested=False)], dict(keep=1), ["0.4.0-cpu"],
                 ["0.5.0-cpu"], id="the-installs-it-drives-count-first"),
    pytest.param([Candidate("0.5.0-cpu", "0.5.0", tested=False), Candidate("0.6.0-cpu", "0.6.0", tested=False)],
                 dict(keep=1), ["0.6.0-cpu"], ["0.5.0-cpu"], id="untested-alone-newest-first"),
]


@pytest.mark.parametrize(("found", "facts", "kept", "removed"), CASES)
def test_choose(found: list[Candidate], facts: dict[str, object], kept: list[str], removed: list[str]) -> None:
    decision = choose(found, **facts)  # type: ignore[arg-type]
    assert [n for n, _ in decision.keep] == kept
    assert list(decision.remove) == removed


def test_why_each_stays() -> None:
    decision = choose(THREE, keep=1, current="0.4.0-cpu", pinned="0.3.0-cpu", locked={"0.3.0-cpu": "a.lock"})
    assert dict(decision.keep) == {"0.3.0-cpu": "pinned, named by a.lock", "0.4.0-cpu": "one of the newest 1, current"}


def test_why_each_goes() -> None:
    found = [c("0.3.1-cpu"), c("0.4.0-cpu"), Candidate("0.5.0-cpu", "0.5.0", tested=False)]
    decision = choose(found, keep=1, current="0.4.0-cpu")
    assert dict(decision.why_removed) == {
        "0.3.1-cpu": "not one of the newest 1",
        "0.5.0-cpu": "this superfluid does not drive it, and the newest 1 count the installs it drives first"}
    assert dict(choose(found, keep=3).keep)["0.5.0-cpu"] == ("one of the newest 3, counted after the installs "
                                                             "this superfluid drives")  # no parentheses in parentheses


def test_a_negative_keep_is_refused() -> None:
    with pytest.raises(ValueError, match="not a count"):
        choose(THREE, keep=-1)


#: this host's platform, as the verdict judges an install by
HERE = host_platform({})


def _install(home: Path, name: str) -> None:
    version, backend = name.split("-", 1)

    def stage(staging: Path) -> Receipt:
        (staging / "lib" / "libx.so").write_text(name)
        return Receipt(id="demo", install=name, version=version, backend=backend, worker=worker_path("demo"),
                       sources=(Source(f"file:///{name}", "0" * 64),), tested=True, chosen_by="tested")

    install_staged(home, "demo", name, stage, lambda _s: None)


def test_collect_removes_in_the_order_remove_does_and_a_dry_run_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for name in ("1.0-cpu", "2.0-cpu", "3.0-cpu"):
        _install(home, name)
    pin(home, "demo", "1.0-cpu")
    root = runtime_root(home, "demo")
    dry = collect(str(home), "demo", keep=1, platform=HERE, dry_run=True)
    assert dry.decision.remove == ("2.0-cpu",) and dry.dry_run
    assert [i.name for i in list_installs(root)] == ["3.0-cpu", "2.0-cpu", "1.0-cpu"]
    done = collect(str(home), "demo", keep=1, platform=HERE)
    assert done.to_json() == {"id": "demo", "dry_run": False, "keep": 1, "removed": ["2.0-cpu"],
                              "kept": [{"install": "1.0-cpu", "state": "ready", "why": "current, pinned"},
                                       {"install": "3.0-cpu", "state": "ready", "why": "one of the newest 1"}],
                              "current": "1.0-cpu", "why_removed": [{"install": "2.0-cpu", "state": "ready",
                                                                     "why": "not one of the newest 1"}]}
    assert sorted(i.name for i in list_installs(root)) == ["1.0-cpu", "3.0-cpu"]
    assert current_install(root) == "1.0-cpu"
    assert sorted(n for n in (p.name for p in root.iterdir()) if n.startswith(".")) == [".install.lock"]
