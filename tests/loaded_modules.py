"""What a command line loads: run a ``main`` in a fresh interpreter, answer its exit code, its stdout
and every module it imported (the tests that a line imports its own code only)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

_SCRIPT = """\
import contextlib, importlib, io, json, sys
main = getattr(importlib.import_module(sys.argv[1]), "main")
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[2:])
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


class Loaded(NamedTuple):
    code: int
    out: str
    modules: frozenset[str]

    def under(self, prefix: str) -> set[str]:
        """The loaded modules that are ``prefix`` or below it."""
        return {m for m in self.modules if m == prefix or m.startswith(prefix + ".")}


def loaded(module: str, argv: Sequence[str], env: Mapping[str, str], *, python: str = sys.executable) -> Loaded:
    """Run ``module.main(argv)`` in a new ``python`` with ``env``; what it answered and loaded."""
    done = subprocess.run([python, "-c", _SCRIPT, module, *argv], env=dict(env), capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    return Loaded(doc["code"], doc["out"], frozenset(doc["modules"]))
