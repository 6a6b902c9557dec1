"""scripts/demo, the README's first command, runs its whole story: it must keep working (issue 11, item 5).

It builds (or finds) the reference engine, makes a local mirror, installs basert from it, shows
`superfluid runtimes`, serves in the background, prints one completion and stops the server with
SIGTERM; offline (no network but the loopback server it starts) and within seconds.
"""

from __future__ import annotations

import re
import subprocess
import time

from tests import cli
from tests.conftest import ROOT, native_cache


def test_the_demo_tells_the_whole_story() -> None:
    env = cli.environment(SUPERFLUID_NATIVE_CACHE=str(native_cache()))
    start = time.monotonic()
    done = subprocess.run(["bash", str(ROOT / "scripts" / "demo")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False)
    took = time.monotonic() - start
    out = done.stdout
    assert done.returncode == 0, out[-3000:]
    assert "superfluid: basert 0.4.0-cpu installed (0.4.0, ABI 1, chosen by abi)" in out
    assert re.search(r"^basert +ready +0\.4\.0-cpu +0\.4\.0 +1 ", out, flags=re.M), out
    assert re.search(r"^superfluid: basert 0\.4\.0 \(ABI 1\) serves tiny\.base on http://127\.0\.0\.1:\d+ "
                     r"\(installed: .*/runtimes/basert/0\.4\.0-cpu\)$", out, flags=re.M), out
    assert '"text": " a time the tiny reference engine spoke plainly and stopped"' in out
    assert out.rstrip().endswith("superfluid serve exited 0")
    assert took < 60, f"the demo took {took:.0f} s"
