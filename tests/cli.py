"""Our console scripts run the way every test runs them: ``superfluid``, ``superfluid-worker-<id>`` and
``superfluid-manifest`` of the test environment (``script``), in the environment a test run sees
(``environment``: the developer's shell less what would change or leak into the run), answering a
``Run`` (exit code, stdout, stderr, and the fixes it rendered); ``start`` leaves a long-running one (a
server) running; ``paste`` runs a fix a run rendered, in the same situation, and records whether it held.

Every fix a run renders (``runtime.kernel.fixes``, through ``SUPERFLUID_FIX_LOG``) and every paste is
appended to ``REPORT`` (one JSON line each, with the test that ran it), which scripts/fix-report reads
after the suite: every fix site of the code emitted and pasted, no paste failing (issue 42)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from superfluid.runtime.process import is_secret
from superfluid.source_hints import takes

__all__ = ["VENV_BIN", "REPORT", "script", "environment", "Emitted", "Run", "run", "start", "paste"]

ROOT = Path(__file__).resolve().parent.parent
#: where the console scripts are: the test environment's bin/ (SUPERFLUID_TEST_BIN names another)
VENV_BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))

#: where the suite's hint report is gathered (scripts/fix-report reads it; SUPERFLUID_FIX_REPORT names another)
REPORT = Path(os.environ.get("SUPERFLUID_FIX_REPORT", ROOT / ".cache" / "fix-report"))
_FIX_LOG = "SUPERFLUID_FIX_LOG"

#: prefixes of the variables that steer our commands, the engines, an OpenAI client or the Python under them
_STEERING = ("SUPERFLUID_", "BASERT_", "OPENAI_", "PYTHON")
#: names that change what a command does: CI turns the progress bar off, VIRTUAL_ENV is where MLX is looked for
_CHANGING = frozenset({"CI", "VIRTUAL_ENV"})


def script(name: str) -> str:
    """The path of the console script ``name`` (``superfluid``, ``superfluid-worker-basert``...), or of
    another program of the test environment (``python``, ``gunicorn``)."""
    return str(VENV_BIN / name)


def _leaks(name: str, value: str) -> bool:
    """A variable of the developer's shell a test run must not see: one that steers our commands
    (the native cache aside: it only says where built artifacts are), a proxy (every server here is
    on loopback), or a credential, by a word of its name or by a URL with userinfo in its value."""
    if name.startswith(_STEERING) and name != "SUPERFLUID_NATIVE_CACHE":
        return True
    if name in _CHANGING or "proxy" in name.lower():
        return True
    return is_secret(name, value)


def environment(home: Path | None = None, **extra: str) -> dict[str, str]:
    """What a test run of our commands sees: this process's environment less what leaks from the
    developer's shell (``_leaks``), SUPERFLUID_HOME naming ``home`` when given, then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not _leaks(k, v)}
    if home is not None:
        env["SUPERFLUID_HOME"] = str(home)
    env.update(extra)
    return env


@dataclass(frozen=True, slots=True)
class Emitted:
    """A fix a run rendered: the site of the code that built it, its command's words, what it does."""

    site: str
    argv: tuple[str, ...]
    does: str


@dataclass(frozen=True, slots=True)
class Run:
    """One finished run of a command, and the fixes it rendered, in order."""

    code: int
    stdout: str
    stderr: str
    fixes: tuple[Emitted, ...] = ()

    def json(self) -> Any:
        return json.loads(self.stdout)

    def fix(self, *words: str) -> Emitted:
        """The first fix rendered whose command holds each of ``words`` (the first of all without)."""
        for f in self.fixes:
            if all(w in f.argv for w in words):
                return f
        raise AssertionError(f"no fix with {words} among {[' '.join(f.argv) for f in self.fixes]}:\n{self.stderr}")


def _argv(command: str | Path, argv: Sequence[str | Path]) -> list[str]:
    """``command`` (a console script's name, or the absolute path of one elsewhere: an install's
    launcher) and its arguments."""
    return [str(VENV_BIN / command), *map(str, argv)]


def _report(kind: str, record: dict[str, Any]) -> None:
    """One line of the suite's hint report (``emitted`` or ``pasted``), with the test that wrote it."""
    REPORT.mkdir(parents=True, exist_ok=True)
    record = {**record, "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]}
    with open(REPORT / f"{kind}-{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def run(command: str | Path, *argv: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None,
        input: str | None = None, timeout: float | None = 120, prefix: Sequence[str | Path] = (),
        new_session: bool = False) -> Run:
    """Run ``command argv...`` to its end in ``env`` (default ``environment()``), stdin closed unless
    ``input`` is given; ``prefix`` goes before it (``strace ...``, ``setpriv ...``, ``python -X ...``);
    ``new_session``: in a session of its own. A run past ``timeout`` seconds raises
    ``subprocess.TimeoutExpired``. The fixes it renders are in ``Run.fixes`` and the suite's report."""
    env = dict(environment() if env is None else env)
    with tempfile.TemporaryDirectory(prefix="superfluid-fixes-") as where:
        log = Path(where) / "fixes.jsonl"
        env.setdefault(_FIX_LOG, str(log))
        done = subprocess.run([*map(str, prefix), *_argv(command, argv)], env=env, cwd=cwd, input=input,
                              stdin=subprocess.DEVNULL if input is None else None, capture_output=True, text=True,
                              timeout=timeout, check=False, start_new_session=new_session)
        lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    fixes = tuple(Emitted(d["site"], tuple(d["argv"]), d["does"]) for d in map(json.loads, lines))
    for f in fixes:
        _report("emitted", {"site": f.site, "argv": list(f.argv)})
        _judge(f, Path(command).name, [str(a) for a in argv], done.returncode)
    if "--json" in argv and '"fix' in done.stdout:
        _no_prose_fix(done.stdout)
    return Run(done.returncode, done.stdout, done.stderr, fixes)


def _no_prose_fix(stdout: str) -> None:
    """Every ``fix`` of a JSON answer is a command a shell runs: no backticks, no prose around it."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return
    todo = [doc]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            fix = node.get("fix")
            assert not (isinstance(fix, str) and "`" in fix), f"a JSON fix holds prose: {fix!r}"
            todo += node.values()
        elif isinstance(node, list):
            todo += node


#: flags a fix may carry only when the line that rendered it gave them
_ONLY_AS_GIVEN = ("--offline", "--plain-http")


def _judge(fix: Emitted, command: str, argv: list[str], code: int) -> None:
    """What every fix a run renders must be, whatever the test: not the command that just failed,
    carrying the source flags the line gave where its command takes them (``source_hints.takes``), and no
    source flag the line did not give."""
    assert not (code != 0 and list(fix.argv) == [command, *argv]), \
        f"the fix ({fix.site}) is the command that just failed: {' '.join(fix.argv)}"
    taken = takes(fix.argv)
    for flag in ("--mirror", *_ONLY_AS_GIVEN):
        gave = any(a == flag or a.startswith(flag + "=") for a in argv)
        has = flag in fix.argv
        if gave and flag in taken and not has and "--from" not in fix.argv and "--mirror" not in fix.argv \
                and not (flag == "--offline" and fix.does.startswith("fills the cache")):
            raise AssertionError(f"the fix ({fix.site}) drops {flag} the line gave: {' '.join(fix.argv)}")
        if has and not gave and flag in _ONLY_AS_GIVEN:
            raise AssertionError(f"the fix ({fix.site}) names {flag}, which the line did not give: "
                                 f"{' '.join(fix.argv)}")


def _last_line(text: str) -> str:
    return next((line for line in reversed(text.splitlines()) if line.strip()), "")


def paste(fix: Emitted, given_for: Run, *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
          timeout: float | None = 120) -> Run:
    """Run ``fix`` as a user pastes it, in the situation ``given_for`` met (``env``, ``cwd``): it held
    when its command did not exit 2 and did not end in the error it was given for (recorded in the
    suite's report); the test then asserts what the fix says it does. Answers the paste's run."""
    assert fix.argv[0] in ("superfluid", "superfluid-manifest"), f"a fix names our command: {fix.argv}"
    pasted = run(fix.argv[0], *fix.argv[1:], env=env, cwd=cwd, timeout=timeout)
    same = given_for.code != 0 and _last_line(pasted.stderr) == _last_line(given_for.stderr) != ""
    held = pasted.code != 2 and not same
    _report("pasted", {"site": fix.site, "argv": list(fix.argv), "held": held, "code": pasted.code})
    assert held, (f"the fix `{' '.join(fix.argv)}` ({fix.site}) did not hold: exit {pasted.code}"
                  + (", the same error it was given for" if same else "") + f"\n{pasted.stderr}")
    return pasted


def start(command: str | Path, *argv: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None,
          stdout: int | IO[Any] = subprocess.PIPE, stderr: int | IO[Any] = subprocess.PIPE,
          new_session: bool = False) -> subprocess.Popen[str]:
    """Start ``command argv...`` as ``run`` would and leave it running (a server, a command to
    interrupt): its process, stdin closed, stdout and stderr pipes unless given."""
    return subprocess.Popen(_argv(command, argv), env=dict(environment() if env is None else env), cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, text=True,
                            start_new_session=new_session)
