"""A runtime's library not found names what fixes it (issue 42): the install of the runtime, a ``Fix``
(``runtime/hostfacts/locate.py``) that the suite pastes, and how to name a library (advice)."""

from __future__ import annotations

from pathlib import Path

from tests import cli
from tests.end_to_end.releases import libllama_archive
from tests.release_server import ReleaseServer

REPO = "ggml-org/llama.cpp"


def test_the_hint_of_a_library_not_found_installs_it(home: Path, release_server: ReleaseServer,
                                                      libllama_v2: Path) -> None:
    release_server.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": libllama_archive(libllama_v2)})
    env = cli.environment(home, SUPERFLUID_GITHUB_API=release_server.url, SUPERFLUID_HOST_VULKAN="0")
    done = cli.run("superfluid", "runtimes", env=env)
    line = next(x for x in done.stdout.splitlines() if x.startswith("llamacpp: llama.cpp not found"))
    assert line.endswith(": name one with --llamacpp-lib or SUPERFLUID_LLAMA_LIB; or "
                         "`superfluid runtime install llamacpp` installs it")
    fix = done.fix("install", "llamacpp")
    assert fix.site.startswith("superfluid.runtime.hostfacts.locate:")
    assert cli.paste(fix, done, env=env).code == 0
    rows = cli.run("superfluid", "runtimes", "--json", env=env).json()
    assert next(r for r in rows if r["id"] == "llamacpp")["state"] == "ready"
