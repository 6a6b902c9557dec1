"""How the face asks workers: the override first, a scrubbed environment, symlinked executables,
options checked before any worker starts, and failing, hanging or garbage workers named."""

from __future__ import annotations

import json
import os
from pathlib import Path

from superfluid.runtime import registry
from tests.declarations.conftest import SUPERFLUID, base_env, fake_worker, sf, sf_json, validate

SECRETS = {"GITHUB_TOKEN": "ghp_secret", "HF_TOKEN": "hf_secret", "AWS_SECRET_ACCESS_KEY": "aws_secret",
           "DATABASE_URL": "postgres://u:p@h/db"}

#: a worker answering like llamacpp's, but with one build of its own, recording its environment
OTHER_LLAMA = """
record = os.environ.get("FAKE_RECORD")
if record:
    with open(record, "a") as f:
        f.write(json.dumps({"args": args, "env": dict(os.environ)}) + "\\n")
if args == ["versions", "--json"]:
    print(json.dumps([{"version": "b99999", "installs": True, "install": "b99999-cpu", "installed": False,
                       "tested": True, "layout": "v9"}]))
elif args == ["options", "--json"]:
    print(json.dumps([{"name": "threads", "type": "int", "description": "threads", "default": 1}]))
elif args[:1] == ["check"]:
    print(json.dumps({"runtime": {"id": "llamacpp", "version": "fake"}, "available": "a fake worker"}))
    sys.exit(1)
else:
    sys.exit(2)
"""


def test_override_worker_answers_versions(home: Path, tmp_path: Path) -> None:
    worker = fake_worker(tmp_path / "other-llama", OTHER_LLAMA)
    env = base_env(home, SUPERFLUID_WORKER_LLAMACPP=str(worker))
    rows = sf_json(env, "runtime", "versions", "llamacpp", "--json")
    assert rows == [{"version": "b99999", "installs": True, "install": "b99999-cpu", "installed": False,
                     "tested": True, "layout": "v9"}]
    assert sf_json(env, "runtime", "options", "llamacpp", "--json")[0]["name"] == "threads"
    human = sf(env, "runtime", "versions", "llamacpp")
    assert "b99999" in human.stdout and "layout v9" in human.stdout


def test_override_worker_is_asked_before_the_linked_adapter(home: Path, tmp_path: Path) -> None:
    worker = fake_worker(tmp_path / "other-basert", OTHER_LLAMA)
    rows = sf_json(base_env(home, SUPERFLUID_WORKER_BASERT=str(worker)), "runtime", "versions", "basert", "--json")
    assert [r["version"] for r in rows] == ["b99999"]


def test_a_secret_in_the_callers_environment_never_reaches_a_worker(home: Path, tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    worker = fake_worker(tmp_path / "other-llama", OTHER_LLAMA)
    env = base_env(home, SUPERFLUID_WORKER_LLAMACPP=str(worker), FAKE_RECORD=str(record), **SECRETS)
    for args in (["runtime", "versions", "llamacpp", "--json"], ["runtimes", "--json"], ["compat", "--json"],
                 ["runtime", "check", "llamacpp", "--threads", "2"]):
        sf(env, *args)
    runs = [json.loads(line) for line in record.read_text().splitlines()]
    assert {tuple(r["args"][:1]) for r in runs} >= {("versions",), ("options",), ("check",), ("compat",)}
    for run in runs:
        assert not set(run["env"]) & set(SECRETS), run["args"]
        assert not any(v in ("ghp_secret", "hf_secret", "aws_secret") or "u:p@" in v for v in run["env"].values())
        assert run["env"]["FAKE_RECORD"] == str(record) and run["env"]["SUPERFLUID_HOME"] == str(home)


def _path_without_venv() -> str:
    venv_bin = str(SUPERFLUID.parent)
    return os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if p != venv_bin)


def test_superfluid_through_a_symlink_elsewhere_finds_its_workers(home: Path, tmp_path: Path) -> None:
    bindir = tmp_path / "pkg" / "bin"
    bindir.mkdir(parents=True)
    link = bindir / "superfluid"
    link.symlink_to(SUPERFLUID)
    env = base_env(home, PATH=_path_without_venv())
    rows = sf_json_exe(env, link, "runtime", "versions", "llamacpp", "--json")
    assert [r["version"] for r in rows] == ["b11642", "b11284"]
    runtimes = {r["id"]: r for r in sf_json_exe(env, link, "runtimes", "--json")}
    worker = runtimes["llamacpp"]["worker"]
    assert worker["source"] == "beside superfluid"
    assert worker["path"] == str(SUPERFLUID.parent / "superfluid-worker-llamacpp")
    assert runtimes["mlx"]["state"] == "not installed"


def test_superfluid_through_a_shim_finds_its_workers(home: Path, tmp_path: Path) -> None:
    shim = fake_worker(tmp_path / "shim-superfluid", "")
    shim.write_text(f"#!/bin/sh\nexec {SUPERFLUID} \"$@\"\n")
    env = base_env(home, PATH=_path_without_venv())
    doc = sf_json_exe(env, shim, "compat", "--json")
    assert set(doc["runtimes"]) == set(registry.IDS)


def sf_json_exe(env: dict[str, str], exe: Path, *args: str) -> object:
    done = sf(env, *args, exe=exe)
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


STARTED = """
with open({marker!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
print(json.dumps({{"runtime": {{"id": "llamacpp"}}, "available": True}}))
"""


def test_wrong_option_value_exits_2_before_any_worker_starts(home: Path, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    worker = fake_worker(tmp_path / "recording-worker", STARTED.format(marker=str(marker)))
    env = base_env(home, SUPERFLUID_WORKER_LLAMACPP=str(worker))
    for args, fragment in (
        (["--n-gpu-layers", "lots"], "--n-gpu-layers 'lots': expected an integer from -1 to 2147483647"),
        (["--cache-type-k=q3"], "--cache-type-k 'q3': expected one of f32, f16"),
        (["--tensor-split", "3,x"], "--tensor-split '3,x': expected a comma-separated list of floats"),
        (["--no-such-knob", "1"], "--no-such-knob: no such option (this runtime takes: n-gpu-layers"),
        (["--threads"], "--threads needs a value"),
    ):
        done = sf(env, "runtime", "check", "llamacpp", *args)
        assert done.code == 2, (args, done.stderr)
        assert fragment in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()
    done = sf(env, "runtime", "check", "llamacpp", "--n-gpu-layers", "0", "--flash-attn", "on")
    assert done.code == 0, done.stderr
    assert marker.read_text().split() == ["check", "--n-gpu-layers", "0", "--flash-attn", "on"]


PICKY = """
if "q4_0" in args or "--yarn-orig-ctx" in args and "--rope-scaling" in args:
    print(json.dumps({"runtime": {"id": "llamacpp"}, "available": "llama_init_from_model failed"}))
    sys.exit(1)
print(json.dumps({"runtime": {"id": "llamacpp", "version": "llama.cpp fake"}, "available": True}))
"""


def test_the_option_at_fault_is_named(home: Path, tmp_path: Path) -> None:
    env = base_env(home, SUPERFLUID_WORKER_LLAMACPP=str(fake_worker(tmp_path / "picky", PICKY)))
    done = sf(env, "runtime", "check", "llamacpp", "--threads", "2", "--cache-type-k", "q4_0")
    assert done.code == 1
    assert ("the llamacpp runtime fails with --cache-type-k q4_0 and passes without it: "
            "llama_init_from_model failed") in done.stderr
    done = sf(env, "runtime", "check", "llamacpp", "--yarn-orig-ctx", "4096", "--rope-scaling", "yarn", "--json")
    assert done.code == 1
    assert "fails with --yarn-orig-ctx 4096 --rope-scaling yarn together and passes without them" in done.stderr
    assert json.loads(done.stdout)["options_at_fault"] == ["yarn-orig-ctx", "rope-scaling"]
    assert sf(env, "runtime", "check", "llamacpp", "--threads", "2").code == 0


GARBAGE = 'print("this is not json {")'
FAILING = 'sys.stderr.write("superfluid-worker-llamacpp: libllama exploded\\n"); sys.exit(1)'
HANGING = "time.sleep(30)"


def test_failing_hanging_and_garbage_workers_are_named_and_the_others_answer(home: Path, tmp_path: Path) -> None:
    env = base_env(home, SUPERFLUID_WORKER_LLAMACPP=str(fake_worker(tmp_path / "garbage", GARBAGE)),
                   SUPERFLUID_WORKER_MLX=str(fake_worker(tmp_path / "hanging", HANGING)),
                   SUPERFLUID_WORKER_TIMEOUT="1.5")
    done = sf(env, "compat", "--json")
    assert done.code == 1
    doc = json.loads(done.stdout)
    validate(doc, "compat")
    assert doc["runtimes"]["basert"]["requires"] == {"header": "0.4.0", "abi": 1}
    assert set(doc["runtimes"]) == {"basert"}
    assert "worker garbage: answered with something other than JSON: 'this is not json {'" \
        == doc["unanswered"]["llamacpp"]
    assert doc["unanswered"]["mlx"] == "worker hanging: did not answer within 1.5 s"
    assert "superfluid: llamacpp gave no compat answer: worker garbage" in done.stderr
    assert "superfluid: mlx gave no compat answer: worker hanging: did not answer within 1.5 s" in done.stderr

    env["SUPERFLUID_WORKER_LLAMACPP"] = str(fake_worker(tmp_path / "failing", FAILING))
    done = sf(env, "compat")
    assert done.code == 1
    assert "llamacpp: no answer: worker failing: superfluid-worker-llamacpp: libllama exploded" in done.stdout
    assert "basert: drives baseRT ABI 1" in done.stdout

    rows = {r["id"]: r for r in sf_json(env, "runtimes", "--json")}
    validate(list(rows.values()), "runtimes")
    # runtimes reads `check`, where exit 1 is an answer: the row is missing (the worker's own words
    # are lost when it prints no JSON: see the report, runtime/process.py run_json)
    assert rows["llamacpp"]["state"] == "missing" and rows["llamacpp"]["ready"]
    assert rows["mlx"]["state"] == "missing" and "did not answer within 1.5 s" in rows["mlx"]["ready"]
    assert rows["basert"]["requires"] == {"header": "0.4.0", "abi": 1}

    done = sf(env, "runtime", "versions", "llamacpp", "--json")
    assert done.code == 1 and "worker failing: superfluid-worker-llamacpp: libllama exploded" in done.stderr


WRONG_SHAPE = """
if args[0] == "compat":
    print(json.dumps({"tested": "b11642"}))
else:
    print(json.dumps([{"version": "b1", "installs": "maybe?", "install": None, "installed": "no", "tested": True}]))
"""


def test_a_worker_answering_the_wrong_shape_is_named(home: Path, tmp_path: Path) -> None:
    env = base_env(home, SUPERFLUID_WORKER_LLAMACPP=str(fake_worker(tmp_path / "shapeless", WRONG_SHAPE)))
    done = sf(env, "compat", "--json")
    assert done.code == 1
    reason = json.loads(done.stdout)["unanswered"]["llamacpp"]
    assert reason.startswith("worker shapeless: its `compat --json` answer does not match the compat schema")
    done = sf(env, "runtime", "versions", "llamacpp", "--json")
    assert done.code == 1
    assert "installed and tested must be true or false" in done.stderr
