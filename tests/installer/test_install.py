"""``installer/install``: the plans carried out in order with real bundles of the reference engine
and the staged worker's real check: the first that runs is published, a plan whose probe refuses
publishes nothing and the next is tried, an archive the release lacks is passed over unfetched, and
what is told (events) and answered (``Outcome``) says so. ``--from`` a local bundle end to end."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.events import Event, FellBack, Trying, Unchecked
from superfluid.installer.home.installs import list_installs, runtime_root
from superfluid.installer.install import Outcome, Reporter, install, install_plans
from superfluid.runtime.kernel.receipt import read_receipt
from superfluid.runtime.planning import NotInstallable, Plan, PlanAsset, Request
from superfluid.runtime.probe import ProbeRefused
from tests.conftest import Home
from tests.end_to_end.releases import bundle_name
from tests.settings_from import settings_from

ABI = {"0.2.6": None, "0.3.0": None, "0.3.1": 1, "0.4.0": 1, "0.5.0": 1}  # what each plan says its release states


def plan_of(path: Path, version: str, *, absent: bool = False) -> Plan:
    """A plan of the bundle at ``path``, digest known; ``absent``: the release does not publish it
    (``path`` need not exist)."""
    data = b"" if absent else path.read_bytes()
    asset = PlanAsset(name=path.name, url=str(path), sha256=None if absent else hashlib.sha256(data).hexdigest(),
                      size=None if absent else len(data), digest_source="absent" if absent else "release")
    return Plan(id="basert", version=version, backend="cpu", assets=(asset,), tested=True, chosen_by="tested",
                abi=ABI.get(version, 1), why="test")


def run(plans: list[Plan], env: dict[str, str]) -> tuple[Outcome, list[Event]]:
    told: list[Event] = []
    done = install_plans("basert", plans, settings_from(env), Reporter(tell=told.append), where="test")
    return done, told


def published(env: dict[str, str]) -> list[str]:
    root = runtime_root(env["SUPERFLUID_HOME"], "basert")
    return [i.name for i in list_installs(root)] if root.exists() else []


def nothing_published(env: dict[str, str]) -> None:
    root = runtime_root(env["SUPERFLUID_HOME"], "basert")
    assert published(env) == []
    assert not (root / "current").exists()
    assert [n for n in (os.listdir(root) if root.exists() else []) if n != ".install.lock"] == []


def kinds(told: list[Event]) -> list[tuple[str, int]]:
    return [("trying" if isinstance(e, Trying) else "fell-back", e.index) for e in told
            if isinstance(e, (Trying, FellBack))]


# --- the first plan that runs ----------------------------------------------------------------------------

def test_one_plan_that_runs_is_published(bundles: dict[str, Path], cli_home: Home) -> None:
    env = cli_home.env
    done, told = run([plan_of(bundles["0.4.0"], "0.4.0")], env)
    assert kinds(told) == [("trying", 0)]
    assert (done.id, done.dry_run, done.source, done.fallbacks, done.replaced) == ("basert", False, "test", (), False)
    assert done.receipt is not None and done.receipt.install == "0.4.0-cpu" and done.receipt.abi == 1
    assert done.current == "0.4.0-cpu"
    assert done.path == str(runtime_root(env["SUPERFLUID_HOME"], "basert") / "0.4.0-cpu")
    assert read_receipt(Path(done.path) / "runtime.json") == done.receipt
    assert published(env) == ["0.4.0-cpu"]


@pytest.mark.parametrize(("first", "why"), [
    pytest.param("missing-symbol", "missing-symbol", id="a-library-that-lacks-a-symbol"),
    pytest.param("0.5.0", "0.5.0", id="a-library-of-another-abi"),
])
def test_a_refused_probe_publishes_nothing_and_the_next_plan_is_tried(bundles: dict[str, Path], cli_home: Home,
                                                                     first: str, why: str) -> None:
    env = cli_home.env
    refused = plan_of(bundles[first], "0.4.0" if first == "missing-symbol" else first)
    done, told = run([refused, plan_of(bundles["0.3.1"], "0.3.1")], env)
    assert kinds(told) == [("trying", 0), ("fell-back", 0), ("trying", 1)]
    assert [i for i, _ in done.fallbacks] == [refused.install]
    assert told[1].reason == done.fallbacks[0][1] and told[1].plan == refused
    assert done.receipt is not None and done.receipt.install == "0.3.1-cpu"
    assert published(env) == ["0.3.1-cpu"]  # the refused one left nothing behind
    assert done.current == "0.3.1-cpu"


def test_the_only_plan_refused_raises_its_own_refusal(bundles: dict[str, Path], cli_home: Home) -> None:
    env = cli_home.env
    with pytest.raises(ProbeRefused) as e:
        run([plan_of(bundles["0.5.0"], "0.5.0")], env)
    assert e.value.plan.install == "0.5.0-cpu"
    nothing_published(env)


def test_every_plan_refused_names_each(bundles: dict[str, Path], cli_home: Home) -> None:
    env = cli_home.env
    plans = [plan_of(bundles["0.5.0"], "0.5.0"), plan_of(bundles["missing-symbol"], "0.4.0")]
    with pytest.raises(NotInstallable) as e:
        run(plans, env)
    assert "0.5.0-cpu: " in e.value.message and "0.4.0-cpu: " in e.value.message
    nothing_published(env)


# --- an archive the release does not publish ---------------------------------------------------------------

def test_an_absent_archive_is_passed_over_unfetched(bundles: dict[str, Path], cli_home: Home,
                                                    tmp_path: Path) -> None:
    env = cli_home.env
    gone = tmp_path / bundle_name("0.4.0")  # never written: fetching it would fail
    done, told = run([plan_of(gone, "0.4.0", absent=True), plan_of(bundles["0.3.1"], "0.3.1")], env)
    assert kinds(told) == [("fell-back", 0), ("trying", 1)]  # the absent one is never tried
    assert done.fallbacks == (("0.4.0-cpu", f"{gone.name} is not in this release"),)
    assert published(env) == ["0.3.1-cpu"]


def test_the_only_plan_absent(bundles: dict[str, Path], cli_home: Home) -> None:
    env = cli_home.env
    with pytest.raises(NotInstallable, match="is not in this release"):
        run([plan_of(bundles["0.4.0"], "0.4.0", absent=True)], env)
    nothing_published(env)


def test_no_plan_installs_nothing(cli_home: Home) -> None:
    env = cli_home.env
    with pytest.raises(NotInstallable, match="nothing of basert to install here"):
        run([], env)
    nothing_published(env)


# --- the answer --------------------------------------------------------------------------------------------

def _outcome(dry_run: bool) -> Outcome:
    p = Plan(id="basert", version="1.0", backend="cpu", assets=(), tested=True, chosen_by="tested", abi=1, why="t")
    return Outcome(id="basert", plans=(p,), dry_run=dry_run, source="the listing", fallbacks=(("0.5.0-cpu",
                                                                                               "refused"),),
                   warnings=("w",))


@pytest.mark.parametrize(("dry_run", "keys"), [
    pytest.param(True, {"id", "dry_run", "source", "plans", "warnings"}, id="dry-run-plans-only"),
    pytest.param(False, {"id", "dry_run", "source", "plans", "warnings", "installed", "receipt", "path", "replaced",
                         "current", "pinned", "fallbacks"}, id="install-result"),
])
def test_outcome_json(dry_run: bool, keys: set[str]) -> None:
    out: dict[str, Any] = _outcome(dry_run).to_json()
    assert set(out) == keys
    assert out["dry_run"] is dry_run and out["warnings"] == ["w"] and len(out["plans"]) == 1
    if not dry_run:
        assert out["installed"] is None and out["receipt"] is None
        assert out["fallbacks"] == [{"install": "0.5.0-cpu", "why": "refused"}]


# --- --from a local bundle, end to end -----------------------------------------------------------------------

def test_from_a_local_bundle_dry_run_writes_nothing(bundles: dict[str, Path], cli_home: Home) -> None:
    env = cli_home.env
    data = bundles["0.4.0"].read_bytes()
    req = Request.parse("basert", from_=str(bundles["0.4.0"]), sha256=hashlib.sha256(data).hexdigest())
    done = install(req, settings_from(env), dry_run=True)
    assert done.dry_run and [p.install for p in done.plans] == ["0.4.0-cpu"]
    assert done.source == str(bundles["0.4.0"]) and done.receipt is None
    nothing_published(env)


def test_from_a_local_bundle_without_a_digest_is_installed_unchecked_and_says_so(bundles: dict[str, Path],
                                                                                cli_home: Home) -> None:
    env = cli_home.env
    told: list[Event] = []
    done = install(Request.parse("basert", from_=str(bundles["0.4.0"])), settings_from(env), Reporter(tell=told.append))
    sha = hashlib.sha256(bundles["0.4.0"].read_bytes()).hexdigest()
    unchecked = [e for e in told if isinstance(e, Unchecked)]
    assert [(e.path, e.sha256) for e in unchecked] == [(str(bundles["0.4.0"]), sha)]
    assert len(done.warnings) == 1 and sha in done.warnings[0]
    assert done.receipt is not None and done.receipt.chosen_by == "from"
    assert [s.sha256 for s in done.receipt.sources] == [sha]
    assert published(env) == ["0.4.0-cpu"]


def test_from_a_bundle_of_another_digest_installs_nothing(bundles: dict[str, Path], cli_home: Home) -> None:
    env = cli_home.env
    from superfluid.installer.errors import VerificationError

    with pytest.raises(VerificationError):
        install(Request.parse("basert", from_=str(bundles["0.4.0"]), sha256="0" * 64), settings_from(env))
    nothing_published(env)
