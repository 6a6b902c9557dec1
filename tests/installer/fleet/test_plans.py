"""The rules of a lock (installer/fleet/plans.py): the host facts each kind of machine declares, the kinds
a machine is, what it installs from a lock, and what moved (SPEC §12). Pure: tables of values."""

from __future__ import annotations

from dataclasses import replace

import pytest

from superfluid.installer.fleet.lockfile import Engine, Lock, LockFileError, Target
from superfluid.installer.fleet.plans import (
    HOSTS,
    Change,
    check_targets,
    compare,
    host_for,
    kinds_of,
    select,
    targets_of,
)
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.schema import load
from superfluid.runtime.llamacpp.planner import cuda_major_for_driver
from tests.installer.fleet.test_lockfile import SHA_A, SHA_B, _engine, _file


class TestHosts:
    @pytest.mark.parametrize("platform, kind, host", [
        ("linux-x64", "cpu", Host(os="linux", arch="x64")),
        ("linux-arm64", "cuda", Host(os="linux", arch="arm64", nvidia_driver="580.95.05")),
        ("linux-x64", "rocm", Host(os="linux", arch="x64", rocm=True)),
        ("linux-x64", "vulkan", Host(os="linux", arch="x64", vulkan=True)),
        ("macos-arm64", "metal", Host(os="macos", arch="arm64")),
        ("macos-arm64", "cpu", Host(os="macos", arch="arm64")),
    ])
    def test_each_kind_declares_its_facts(self, platform: str, kind: str, host: Host) -> None:
        assert host_for(platform, kind) == host

    def test_a_cuda_machine_runs_the_newest_cuda_a_driver_runs(self) -> None:
        assert cuda_major_for_driver(host_for("linux-x64", "cuda").nvidia_driver) == 13

    def test_the_schema_names_every_kind(self) -> None:
        assert set(load("lock")["$defs"]["host"]["enum"]) == set(HOSTS)

    @pytest.mark.parametrize("host, kinds", [
        (Host(os="linux", arch="x64"), ["cpu"]),
        (Host(os="linux", arch="x64", nvidia_driver="535.1", vulkan=True), ["cuda", "vulkan", "cpu"]),
        (Host(os="linux", arch="arm64", rocm=True), ["rocm", "cpu"]),
        (Host(os="macos", arch="arm64"), ["metal", "cpu"]),
        (Host(os="macos", arch="x64"), ["cpu"]),
    ])
    def test_the_kinds_a_machine_is_best_first(self, host: Host, kinds: list[str]) -> None:
        assert kinds_of(host) == kinds

    def test_each_declared_host_is_of_its_kind(self) -> None:
        for kind in HOSTS:
            platform = "macos-arm64" if kind == "metal" else "linux-x64"
            assert kinds_of(host_for(platform, kind))[0] == kind

    def test_targets_skip_kinds_a_platform_cannot_be(self) -> None:
        got = targets_of(["basert"], ["linux-x64", "macos-arm64"], ["cpu", "cuda", "metal"])
        assert [(t.platform, t.host) for t in got] == [("linux-x64", "cuda"), ("linux-x64", "cpu"),
                                                       ("macos-arm64", "metal"), ("macos-arm64", "cpu")]

    @pytest.mark.parametrize("runtimes, platforms, backends, says", [
        (["nope"], [], [], "no runtime 'nope'"),
        ([], ["linux-x86"], [], "--platform 'linux-x86' is not a platform"),
        ([], ["linux-x64"], ["tpu"], "--backend 'tpu' is not a kind of machine"),
        ([], ["macos-arm64"], ["cuda"], "--backend cuda fits none of the platforms named"),
        ([], ["linux-x64"], ["metal"], "metal is macos-arm64 only"),
    ])
    def test_bad_targets_are_usage_errors(self, runtimes: list[str], platforms: list[str], backends: list[str],
                                          says: str) -> None:
        with pytest.raises(UsageError, match=says.replace("(", r"\(").replace(")", r"\)")):
            check_targets(runtimes, platforms, backends)


LOCK = Lock("0.1.0", ("basert",), ("linux-x64",), ("cpu", "cuda"),
            (_engine("cpu"), _engine("cuda", "cuda")))


class TestSelect:
    def test_a_plain_machine_gets_the_cpu_engine(self) -> None:
        got = select(LOCK, Host(os="linux", arch="x64"))
        assert {r: [e.install for e in es] for r, es in got.items()} == {"basert": ["0.4.0-cpu"]}

    def test_a_cuda_machine_tries_cuda_then_falls_back_to_cpu(self) -> None:
        got = select(LOCK, Host(os="linux", arch="x64", nvidia_driver="580.1"))
        assert [e.install for e in got["basert"]] == ["0.4.0-cuda", "0.4.0-cpu"]

    def test_one_install_is_tried_once(self) -> None:
        same = Lock("0.1.0", ("basert",), ("linux-x64",), ("cpu", "cuda"), (_engine("cpu"), _engine("cuda", "cpu")))
        assert [e.target.host for e in select(same, Host(os="linux", arch="x64",
                                                         nvidia_driver="580.1"))["basert"]] == ["cuda"]

    @pytest.mark.parametrize("lock, host, runtime, says, fix", [
        (LOCK, Host(os="linux", arch="arm64"), None, "has no engine for linux-arm64",
         "superfluid lock --platform linux-arm64 -o fleet.lock"),
        (LOCK, Host(os="linux", arch="arm64", nvidia_driver="580.1"), None, "has no engine for linux-arm64",
         "superfluid lock --platform linux-arm64 --backend cuda -o fleet.lock"),
        (LOCK, Host(os="linux", arch="x64"), "llamacpp", "has no llamacpp engine for linux-x64",
         "superfluid lock --runtime llamacpp --platform linux-x64 -o fleet.lock"),
        (Lock("0.1.0", ("basert",), ("linux-x64",), ("cuda",), (_engine("cuda", "cuda"),)), Host(os="linux",
                                                                                                 arch="x64"),
         None, "only for cuda machines", "superfluid lock --runtime basert --platform linux-x64 -o fleet.lock"),
    ])
    def test_a_machine_the_lock_has_nothing_for_is_told_the_command(self, lock: Lock, host: Host,
                                                                     runtime: str | None, says: str, fix: str) -> None:
        with pytest.raises(LockFileError) as info:
            select(lock, host, runtime, lock_name="fleet.lock")
        assert says in str(info.value) and "fleet.lock" in info.value.message
        assert [f.command for f in info.value.fixes] == [fix]  # the lock it was given for, kept

    def test_the_default_lock_is_not_named_in_the_fix(self) -> None:
        with pytest.raises(LockFileError) as info:
            select(LOCK, Host(os="linux", arch="arm64"))
        assert [f.command for f in info.value.fixes] == ["superfluid lock --platform linux-arm64"]


def _moved(old: Engine, **new: object) -> Engine:
    return replace(old, **new)  # type: ignore[arg-type]


OLD = _engine()
T = OLD.target
NEWER = _moved(OLD, version="0.4.1", why="0.4.1 states ABI 1",
               assets=(replace(OLD.assets[0], path=OLD.assets[0].path.replace("0.4.0", "0.4.1"), sha256=SHA_B),))
TESTED = Engine(target=Target("llamacpp", "linux-x64", "cpu"), repo="ggml-org/llama.cpp", version="b11284",
                backend="cpu", chosen_by="tested", abi=None, tested=True,
                why="the CPU build", assets=(_file("x.tar.gz"),))


@pytest.mark.parametrize("case, lock, now, same, kinds, says", [
    ("unchanged", Lock("0", (), (), (), (OLD,)), {T: OLD}, None, [], ""),
    ("only-the-url", Lock("0", (), (), (), (OLD,)),
     {T: _moved(OLD, assets=(replace(OLD.assets[0], url="https://m.test/x"),))}, None, [], ""),
    ("new-abi-release", Lock("0", (), (), (), (OLD,)), {T: NEWER}, None, ["moved"], "a new ABI-1 release"),
    ("newer-tested-build", Lock("0", (), (), (), (TESTED,)),
     {TESTED.target: _moved(TESTED, version="b11642", why="the CPU build")}, None, ["moved"], "a newer tested build"),
    ("digest-under-same-name", Lock("0", (), (), (), (OLD,)),
     {T: _moved(OLD, assets=(replace(OLD.assets[0], sha256=SHA_B),))}, None, ["digest"],
     f"locked sha256 {SHA_A}, now {SHA_B}"),
    ("evidence-digest", Lock("0", (), (), (), (OLD,)),
     {T: _moved(OLD, evidence=(replace(OLD.evidence[0], sha256=SHA_A),))}, None, ["digest"], "basert-engine-abi-1.txt"),
    ("moved-and-old-replaced", Lock("0", (), (), (), (OLD,)), {T: NEWER},
     _moved(OLD, assets=(replace(OLD.assets[0], sha256=SHA_B),)), ["digest", "moved"], "locked sha256"),
    ("new-target", Lock("0", (), (), (), ()), {T: OLD}, None, ["new"], ""),
    ("gone", Lock("0", (), (), (), (OLD,)), {T: "baseRT publishes no bundle for linux-x64"}, None, ["gone"],
     "publishes no bundle"),
    ("never-installed", Lock("0", (), (), (), ()), {T: "nothing"}, None, [], ""),
])
def test_what_moved_and_why(case: str, lock: Lock, now: dict[Target, Engine | str], same: Engine | None,
                            kinds: list[str], says: str) -> None:
    changes = compare(lock, now, (lambda _old: same) if same is not None else None)
    assert [c.kind for c in changes] == kinds
    assert all(says in c.why for c in changes[:1])
    assert [c.error for c in changes] == [k in ("digest", "gone") for k in kinds]
    assert all(isinstance(c, Change) for c in changes)
