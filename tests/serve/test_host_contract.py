"""docs/host-contract.md's exit-code examples, run as written (issue 11, item 4).

Each ``console`` block of the page's "Exit codes" section is a session: ``$ superfluid ...`` runs
the command (in a directory holding ``models/`` and ``libs/`` as the page says, with an empty
``SUPERFLUID_HOME``), the lines after it are what it prints (``...`` stands for machine-dependent
text), and ``$ echo $?`` is followed by its exit code. A command ending in ``&`` is a server: it
runs on a free port (the page's ``8080`` stands for it) until ``$ kill -TERM %1; wait %1; echo $?``
stops it and reads its code.
"""

from __future__ import annotations

import re
import shlex
import signal
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import cli
from tests.conftest import ROOT, native_cache
from tests.serving_client import SuperfluidServe

PAGE = ROOT / "docs" / "host-contract.md"


@dataclass
class Step:
    """One command of a session: its line, what it prints, the exit code it ends with."""

    command: str
    output: list[str] = field(default_factory=list)
    code: int | None = None


def sessions() -> list[list[Step]]:
    """The console blocks of the page's "Exit codes" section, as steps."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## 4. Exit codes"):]
    out = []
    for block in re.findall(r"```console\n(.*?)```", section, flags=re.S):
        steps: list[Step] = []
        expect_code = False
        for line in block.splitlines():
            if line.startswith("$ ") and ("echo $?" in line):
                expect_code = True
            elif line.startswith("$ "):
                steps.append(Step(line[2:]))
            elif expect_code:
                steps[-1].code = int(line)
                expect_code = False
            else:
                steps[-1].output.append(line)
        out.append(steps)
    return out


SESSIONS = sessions()


def matches(expected: str, got: str) -> bool:
    """``got`` is ``expected`` with each ``...`` standing for any text."""
    pattern = ".*?".join(re.escape(piece) for piece in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The directory the page's examples run in, and their environment."""
    engines = native_cache() / "basert"
    (tmp_path / "models").mkdir()
    (tmp_path / "libs").mkdir()
    (tmp_path / "models" / "tiny.base").write_bytes((engines / "models" / "tiny.base").read_bytes())
    (tmp_path / "models" / "broken.base").write_bytes(b"BASE\x01")  # the magic, then too little
    for version in ("0.4.0", "0.5.0"):
        (tmp_path / "libs" / f"basert-{version}").symlink_to(engines / version)
    (tmp_path / "home").mkdir()
    return tmp_path, cli.environment(tmp_path / "home")


def argv_of(command: str) -> list[str]:
    words = shlex.split(command)
    assert words[0] == "superfluid", command
    return [cli.script("superfluid"), *words[1:]]


def test_the_page_has_an_example_for_every_exit_code() -> None:
    codes = {step.code for steps in SESSIONS for step in steps}
    assert codes == {0, 1, 2, 3, 4}


@pytest.mark.parametrize("steps", SESSIONS, ids=[f"exit-{s[0].code}" for s in SESSIONS])
def test_each_example_runs_as_written(sandbox: tuple[Path, dict[str, str]], steps: list[Step]) -> None:
    cwd, env = sandbox
    for step in steps:
        if step.command.endswith(" &"):
            argv = [w if w != "8080" else "0" for w in argv_of(step.command[:-2])]
            server = SuperfluidServe(argv, env, cwd=cwd)
            try:
                [expected] = step.output
                assert matches(expected.replace(":8080 ", f":{server.port} "), server.ready["line"]), \
                    server.ready["line"]
                code, _, err = server.stop(signal.SIGTERM)
            finally:
                server.close()
            assert code == step.code, err
            continue
        done = cli.run(*argv_of(step.command), env=env, cwd=cwd, timeout=60)
        printed = (done.stdout + done.stderr).splitlines()
        assert len(printed) == len(step.output), printed
        for expected, got in zip(step.output, printed, strict=True):
            assert matches(expected, got), f"{step.command}:\n  page: {expected}\n  got:  {got}"
        assert done.code == step.code, done.stderr
