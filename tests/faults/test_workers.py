"""Workers that misbehave (issue 14, item 6): an answer is checked against its schema before it is
used (the row says why, the other rows still answer, no traceback); a worker that hangs costs one
timeout, not one per question, and is not asked again for a while; a killed worker's children die
with it. The workers are real programs named by SUPERFLUID_WORKER_LLAMACPP."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests import cli
from tests.faults.conftest import Home

HEAD = f"#!{sys.executable}\nimport json, os, sys, time\n"


def _worker(path: Path, check_answer: str, *, others: str = "print('[]')") -> Path:
    path.write_text(HEAD + f"if sys.argv[1:2] == ['check']:\n    {check_answer}\nelse:\n    {others}\n")
    path.chmod(0o755)
    return path


#: (check's answer, fragment of the reason the row gives)
ANSWERS = [
    pytest.param("print('[1, 2]')", "is not of type 'object'", id="an-array"),
    pytest.param("print(json.dumps({'available': 1}))", "$.available", id="available-a-number"),
    pytest.param("print(json.dumps({'available': True, 'runtime': {'version': 1.5}}))", "$.runtime.version",
                 id="version-a-number"),
    pytest.param("print(json.dumps({'available': True, 'devices': 'cpu'}))", "$.devices", id="devices-a-string"),
    pytest.param("print(json.dumps({'available': True, 'devices': [{'memory': '8G'}]}))", "$.devices[0].memory",
                 id="memory-a-string"),
    pytest.param("print(json.dumps({'available': True, 'abi': 'one'}))", "$.abi", id="abi-a-string"),
    pytest.param("print('[' * 100000 + ']' * 100000)", "nested too deeply", id="nested-100000"),
    pytest.param("print('{\"available\": \"\\\\ud800\"}')", "lone surrogate", id="lone-surrogate"),
    pytest.param("print('{\"available\": NaN}')", "NaN", id="nan"),
    pytest.param("sys.stdout.write('x' * (5 << 20))", "printed more than", id="five-mib-of-output"),
]


@pytest.mark.parametrize(("answer", "reason"), ANSWERS)
def test_a_wrong_answer_marks_its_row_and_the_others_answer(installed_home: Home, tmp_path: Path, answer: str,
                                                            reason: str) -> None:
    env = dict(installed_home.env, SUPERFLUID_WORKER_LLAMACPP=str(_worker(tmp_path / "wrong", answer)))
    run = installed_home.sf("runtimes", "--json", env=env)
    assert run.code == 0
    rows = {r["id"]: r for r in run.json()}
    assert rows["llamacpp"]["state"] == "missing" and reason in rows["llamacpp"]["ready"], rows["llamacpp"]
    assert rows["basert"]["state"] == "ready" and rows["mlx"]["state"] in ("not installed", "missing")
    from superfluid.runtime.kernel.schema import errors

    assert errors(run.json(), "runtimes") == []
    check = installed_home.sf("runtime", "check", "llamacpp", env=env)
    assert check.code == 1 and reason in check.stderr


def test_a_hanging_worker_costs_one_timeout_and_is_remembered(installed_home: Home, tmp_path: Path) -> None:
    """Asked check, versions and options by `runtimes`: one timeout (not three), and within a
    minute a second `runtimes` does not start it at all."""
    marks = tmp_path / "started"
    marks.mkdir()
    hang = f"open(os.path.join({str(marks)!r}, str(os.getpid())), 'w').close(); time.sleep(600)"
    env = dict(installed_home.env, SUPERFLUID_WORKER_LLAMACPP=str(_worker(tmp_path / "hang", hang, others=hang)),
               SUPERFLUID_WORKER_TIMEOUT="1")
    started = time.monotonic()
    run = installed_home.sf("runtimes", "--json", env=env)
    took = time.monotonic() - started
    assert run.code == 0 and took < 2.5, took  # three questions, one timeout of 1 s
    row = next(r for r in run.json() if r["id"] == "llamacpp")
    assert row["state"] == "missing" and "did not answer within 1 s" in row["ready"]
    assert len(os.listdir(marks)) == 1
    started = time.monotonic()
    again = installed_home.sf("runtimes", "--json", env=env)
    assert time.monotonic() - started < 1.0 and len(os.listdir(marks)) == 1  # not started again
    row = next(r for r in again.json() if r["id"] == "llamacpp")
    assert "not asked again" in row["ready"]
    fixed = _worker(tmp_path / "hang", "print(json.dumps({'available': True}))")  # the worker file changed
    fixed_env = dict(env, SUPERFLUID_WORKER_LLAMACPP=str(fixed))
    assert next(r for r in installed_home.sf("runtimes", "--json", env=fixed_env).json()
                if r["id"] == "llamacpp")["state"] == "ready"


def test_a_killed_worker_takes_its_children_with_it(tmp_path: Path) -> None:
    """A worker that starts a child holding its output open and then hangs: after the timeout
    neither is left running, and the command returns at once (it does not wait for the child)."""
    pids = tmp_path / "pids"
    spawn = ("import subprocess; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
             f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{p.pid}}'); time.sleep(600)")
    home_path = tmp_path / "home"
    spawner = _worker(tmp_path / "spawner", spawn, others=spawn)
    env = dict(cli.environment(home_path), SUPERFLUID_WORKER_LLAMACPP=str(spawner), SUPERFLUID_WORKER_TIMEOUT="1")
    home = Home(home_path, env, tmp_path)
    started = time.monotonic()
    run = home.sf("runtime", "check", "llamacpp", timeout=10)
    assert run.code == 1 and time.monotonic() - started < 4
    worker, child = (int(x) for x in pids.read_text().split())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(_alive(p) for p in (worker, child)):
        time.sleep(0.05)
    assert not _alive(worker) and not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not reaped by its parent) is not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_worker_answers_in_the_cache_are_checked_again(installed_home: Home, tmp_path: Path) -> None:
    """A tampered answer cache cannot slip a wrong answer past the check: the entry is ignored."""
    worker = _worker(tmp_path / "good", "print(json.dumps({'available': True, 'runtime': {'version': 'v'}}))")
    env = dict(installed_home.env, SUPERFLUID_WORKER_LLAMACPP=str(worker))
    assert next(r for r in installed_home.sf("runtimes", "--json", env=env).json()
                if r["id"] == "llamacpp")["state"] == "ready"
    cache = installed_home.path / "cache" / "answers.json"
    doc = json.loads(cache.read_text())
    for entry in doc.values():
        if isinstance(entry, dict) and "answer" in entry:
            entry["answer"] = ["not", "a", "report"]
    cache.write_text(json.dumps(doc))
    row = next(r for r in installed_home.sf("runtimes", "--json", env=env).json() if r["id"] == "llamacpp")
    assert row["state"] == "ready"  # asked again, not taken from the tampered entry
