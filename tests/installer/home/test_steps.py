"""``installer.steps`` with ``publish.install_staged``: stage → probe → receipt → publish. The probe
is a real staged worker (a sh script the stage puts in place of the launcher) judged by a fake
adapter; it runs before the receipt exists and without any worker override in its environment."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.home.fill import Verified
from superfluid.installer.home.installs import runtime_root
from superfluid.installer.home.publish import install_staged
from superfluid.installer.home.steps import PlanSteps, probe_environ
from superfluid.installer.home.store import StoreError
from superfluid.installer.phases import Phases
from superfluid.runtime import registry
from superfluid.runtime.kernel.layout import worker_path
from superfluid.runtime.kernel.receipt import read_receipt
from superfluid.runtime.planning import Plan, PlanAsset
from superfluid.runtime.probe import Probed, ProbeRefused
from tests.settings_from import settings_from

RID = "demo"
SHA = "b" * 64

# prints its report: whether a receipt is beside it, the override it sees, the --lib it was given
WORKER = """#!/bin/sh
if [ -e "$(dirname "$0")/../runtime.json" ]; then seen=true; else seen=false; fi
printf '{"available": true, "receipt_seen": %s, "override": "%s", "lib": "%s", "argv1": "%s"}\\n' \
  "$seen" "${SUPERFLUID_WORKER_BASERT:-}${SUPERFLUID_WORKER_LLAMACPP:-}" "$3" "$1"
"""


class FakeAdapter:
    """Judges by ``verdict``: ``None`` accepts, a string refuses with that reason; keeps each report."""

    id = RID

    def __init__(self, verdict: str | None = None) -> None:
        self.verdict = verdict
        self.reports: list[Mapping[str, Any]] = []

    def probe_argv(self, lib_dir: str) -> list[str]:
        return ["check", "--lib", lib_dir]

    def judge_probe(self, plan: Plan, report: Mapping[str, Any], *, untested: bool) -> Probed:
        self.reports.append(report)
        if self.verdict is not None:
            raise ProbeRefused(plan, self.verdict)
        return Probed(tested=True, abi=None, version=None, extra={"seen": report["receipt_seen"]})


def the_plan() -> Plan:
    a = PlanAsset(name="b.tar.gz", url="http://mirror.test/v1/b.tar.gz", sha256=SHA, size=1, digest_source="release")
    return Plan(id=RID, version="1.0", backend="cpu", assets=(a,), tested=True, chosen_by="tested", abi=None,
                why="test")


def fill(lib: Path) -> list[Verified]:
    """Stages ``lib/`` and puts the reporting worker in place of the launcher."""
    (lib / "libengine.so").write_text("engine")
    worker = lib.parent / worker_path(RID)
    worker.write_text(WORKER)
    worker.chmod(0o755)
    p = the_plan()
    return [(p.assets[0], lib.parent / "cache-blob", SHA)]


def env(tmp_path: Path) -> dict[str, str]:
    overrides = {registry.env_override(i): f"/elsewhere/worker-{i}" for i in registry.IDS}
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SUPERFLUID_HOME": str(tmp_path), **overrides}


def test_probe_environ_drops_every_worker_override() -> None:
    given = {"PATH": "/bin", "SUPERFLUID_HOME": "/h", "SUPERFLUID_HOST_OS": "linux",
             **{registry.env_override(i): "/w" for i in registry.IDS}}
    assert probe_environ(settings_from(given)) == {"PATH": "/bin", "SUPERFLUID_HOME": "/h",
                                                   "SUPERFLUID_HOST_OS": "linux"}


def test_stage_then_probe_then_receipt_then_publish(tmp_path: Path) -> None:
    home = tmp_path / "home"
    adapter = FakeAdapter()
    phases = Phases()
    steps = PlanSteps(adapter, the_plan(), fill, settings=settings_from(env(tmp_path)), untested=False,
                      platform="linux-x86_64", lock={"file": "superfluid.lock", "sha256": SHA}, phases=phases)
    published = install_staged(home, RID, "1.0-cpu", steps.stage, steps.probe)
    (report,) = adapter.reports
    assert report["receipt_seen"] is False  # the probe judged the library, not what we say of it
    assert report["override"] == ""  # no worker the user named for another command
    assert report["argv1"] == "check" and report["lib"].endswith("/lib")
    root = runtime_root(home, RID)
    written = read_receipt(root / "1.0-cpu" / "runtime.json")
    assert written == published.receipt
    assert [(s.url, s.sha256) for s in written.sources] == [("http://mirror.test/v1/b.tar.gz", SHA)]
    files = written.extra.pop("files")  # issue 22: the receipt also records every staged file
    assert written.extra == {"seen": False, "lock": {"file": "superfluid.lock", "sha256": SHA}}
    assert [f["path"] for f in files] == ["bin/superfluid-worker-demo", "lib/libengine.so"]
    assert (root / "1.0-cpu" / "lib" / "libengine.so").read_text() == "engine"
    assert [name for name, _, _ in phases.spans()] == ["probe"] and steps.probed > 0


def test_a_refusing_probe_publishes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    steps = PlanSteps(FakeAdapter("its check finds no cpu"), the_plan(), fill, settings=settings_from(env(tmp_path)),
                      untested=False, platform="linux-x86_64")
    with pytest.raises(ProbeRefused, match="its check finds no cpu"):
        install_staged(home, RID, "1.0-cpu", steps.stage, steps.probe)
    assert sorted(os.listdir(runtime_root(home, RID))) == [".install.lock"]  # the staging is gone
    assert steps.probed == 0


def test_a_worker_that_fails_is_a_refusal(tmp_path: Path) -> None:
    def broken(lib: Path) -> list[Verified]:
        out = fill(lib)
        (lib.parent / worker_path(RID)).write_text("#!/bin/sh\necho 'no library here' >&2\nexit 3\n")
        return out

    steps = PlanSteps(FakeAdapter(), the_plan(), broken, settings=settings_from(env(tmp_path)), untested=False,
                      platform="linux-x86_64")
    with pytest.raises(ProbeRefused, match="its check failed") as info:
        install_staged(tmp_path / "home", RID, "1.0-cpu", steps.stage, steps.probe)
    assert "no library here" in info.value.reason


def test_no_receipt_from_either_step_publishes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(StoreError, match="it has no receipt"):
        install_staged(home, RID, "1.0-cpu", lambda staging: None, lambda staging: None)
    assert sorted(os.listdir(runtime_root(home, RID))) == [".install.lock"]


def test_a_probe_that_answers_a_receipt_replaces_the_stages(tmp_path: Path) -> None:
    from superfluid.runtime.kernel.receipt import Receipt, Source

    def made(tag: str) -> Receipt:
        return Receipt(id=RID, install="1.0-cpu", version="1.0", backend="cpu", worker=worker_path(RID),
                       sources=(Source(f"file:///{tag}", "0" * 64),), tested=True, chosen_by="tested")

    seen: list[bool] = []

    def probe(staging: Path) -> Receipt:
        seen.append((staging / "runtime.json").is_file())  # the stage's receipt is in place
        return made("probed")

    published = install_staged(tmp_path / "home", RID, "1.0-cpu", lambda staging: made("staged"), probe)
    assert seen == [True]
    assert [s.url for s in published.receipt.sources] == ["file:///probed"]
    assert json.loads((published.path / "runtime.json").read_text())["sources"][0]["url"] == "file:///probed"


# waits while primed (its stdin open), as every engine's worker does (runtime/worker.py); then reports
# whether the library is there and which process answers
HOLDING = """#!/bin/sh
echo $$ > "$(dirname "$0")/../started"
if [ "${SUPERFLUID_PRIMED:-}" = 1 ]; then cat > /dev/null; fi
if [ -e "$3/libengine.so" ]; then here=true; else here=false; fi
printf '{"available": true, "receipt_seen": false, "lib_there": %s, "pid": %s}\\n' "$here" "$$"
"""


def _staging_with_holding_launcher(tmp_path: Path) -> Path:
    """A staging directory with an empty ``lib/`` and ``HOLDING`` as its launcher."""
    staging = tmp_path / "staging"
    (staging / "lib").mkdir(parents=True)
    launcher = staging / worker_path(RID)
    launcher.parent.mkdir()
    launcher.write_text(HOLDING)
    launcher.chmod(0o755)
    return staging


def test_the_probe_worker_starts_before_the_archives_arrive_and_checks_once_they_are_staged(tmp_path: Path) -> None:
    import time

    staging = _staging_with_holding_launcher(tmp_path)
    started_during_fill: list[bool] = []

    def slow_fill(lib: Path) -> list[Verified]:
        deadline = time.monotonic() + 10
        while not (staging / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        started_during_fill.append((staging / "started").exists())
        (lib / "libengine.so").write_text("engine")
        p = the_plan()
        return [(p.assets[0], lib.parent / "cache-blob", SHA)]

    adapter = FakeAdapter()
    steps = PlanSteps(adapter, the_plan(), slow_fill, settings=settings_from(env(tmp_path)), untested=False,
                      platform="linux-x86_64")
    steps.stage(staging)
    steps.probe(staging)
    (report,) = adapter.reports
    assert started_during_fill == [True]  # started primed, while the archives were still to come
    assert report["lib_there"] is True  # and checked only once they were staged
    assert report["pid"] == int((staging / "started").read_text())  # one worker: the primed one answered


def test_a_failed_stage_stops_the_primed_worker(tmp_path: Path) -> None:
    staging = _staging_with_holding_launcher(tmp_path)
    held: list[int] = []

    def failing_fill(lib: Path) -> list[Verified]:
        assert steps._primed is not None
        held.append(steps._primed.pid)
        raise OSError("disk full")

    steps = PlanSteps(FakeAdapter(), the_plan(), failing_fill, settings=settings_from(env(tmp_path)), untested=False,
                      platform="linux-x86_64")
    with pytest.raises(OSError, match="disk full"):
        steps.stage(staging)
    with pytest.raises(ProcessLookupError):
        os.kill(held[0], 0)  # killed and reaped
