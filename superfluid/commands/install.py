"""``superfluid runtime install <id>``: plan, verify and install a runtime.

See docs/cli.md, "`superfluid runtime install <id> [flags]`".
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from superfluid.install_line import install_line
from superfluid.parser import RUNTIME_IDS, Help, Parser, add_json, exits
from superfluid.release_flags import FOR_VARIABLE
from superfluid.release_flags import add_flags as add_for_flags

# Its flags and page are here for every form; two flags make it another install, run by its own
# module (runs_in): --locked (a fleet's builds: install_locked.py) and --for/SUPERFLUID_FOR (planned
# for another release: install_for.py). A plain install so never loads the lock, signature and TUF
# machinery it does not run.

__all__ = ["HELP", "arguments", "runs_in", "run"]

HELP = Help(
    "fetch, verify and install a runtime",
    "Choose the newest version that installs here (by ABI number for basert, by the tested-build list "
    "for llama.cpp), download it into the cache with its digest checked, probe it in a worker, then "
    "publish it under $SUPERFLUID_HOME/runtimes/<id>/ in one rename. An install already here from the "
    "same archive is said and left as it is (--reinstall installs it again). Progress goes to stderr (a "
    "bar on a terminal only), the result to stdout.",
    ("superfluid runtime install basert", "superfluid runtime install llamacpp --version b11642 --dry-run",
     "superfluid runtime install basert --reinstall",
     "superfluid runtime install basert --from ./basert-engine-linux-x64-0.4.0.tar.gz --sha256 <hex>",
     "superfluid runtime install basert --mirror /srv/mirror --offline",
     "superfluid runtime install --locked superfluid.lock --mirror https://mirror.example.org/engines/"),
    exits(_0="installed (or planned, with --dry-run)",
          _1="a run-time failure: network, verification, a refusal of the rules, the staged worker's probe"),
)


def arguments(p: Parser) -> None:
    p.add_argument("id", nargs="?", help=f"runtime id: {RUNTIME_IDS} (with --locked: every runtime locked)")
    p.add_argument("--locked", nargs="?", const="", metavar="FILE",
                   help="install what this lock names for this machine (default ./superfluid.lock or SUPERFLUID_LOCK)")
    p.add_argument("--version", dest="want_version", metavar="V", help="install this version (e.g. 0.4.0, b11642)")
    p.add_argument("--backend", metavar="B", help="install this backend (cpu, cuda-13.4, vulkan, metal...)")
    p.add_argument("--from", dest="from_", metavar="URL|PATH", help="install this archive instead of a release's")
    p.add_argument("--sha256", metavar="H", help="the digest --from's archive (or an unpinned asset) must have")
    p.add_argument("--untested", action="store_true", help="allow a version of another ABI or not tested")
    p.add_argument("--dry-run", action="store_true", help="print the ordered plans and change nothing")
    p.add_argument("--reinstall", action="store_true",
                   help="install again what is already installed from the same archive (by default: said, and "
                        "nothing is fetched)")
    p.add_argument("--offline", action="store_true", help="use the cache only; never open a connection")
    p.add_argument("--mirror", metavar="URL|DIR", help="fetch releases from this mirror (or SUPERFLUID_MIRROR)")
    p.add_argument("--plain-http", action="store_true")
    p.add_argument("--require-provenance", action="store_true",
                   help="refuse an asset no Sigstore bundle proves was built by its release's workflow (an asset "
                        "with a bundle is always checked; docs/install.md, Provenance)")
    p.add_argument("--timings", action="store_true",
                   help="record the install's phases (listing, download, extract, probe, publish): on stderr, "
                        "or with --json as its timings")
    add_json(p)
    add_for_flags(p)


def runs_in(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """The command module that runs this line instead of this one (the dispatch imports it): a lock's
    install (``--locked``), one planned for another release (``--for``, or ``SUPERFLUID_FOR``); None:
    a plain install, ``run``."""
    if getattr(args, "locked", None) is not None:
        return "install_locked"
    if getattr(args, "for_", None) or environ.get(FOR_VARIABLE):
        return "install_for"
    return None


def run(args: argparse.Namespace) -> int:
    """``runtime install <id>``, planned for this release.

    Raises:
        UsageError: a bad flag value or runtime id (exit 2).
        SuperfluidError: any run-time failure (exit 1).
    """
    return install_line(args, dict(os.environ), lambda _settings: None)
