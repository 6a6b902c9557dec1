"""``superfluid runtime install <id>``: plan, verify and install a runtime.

See docs/cli.md, "`superfluid runtime install <id> [flags]`".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from superfluid.install_report import say
from superfluid.installer.home.store import guard_root, settle
from superfluid.installer.install import Outcome
from superfluid.installer.mutex import install_mutex
from superfluid.installing import check_id, count, home_holds, installed_with, recorded_hint, request_of, show
from superfluid.output import print_json
from superfluid.parser import RUNTIME_IDS, Help, Parser, add_json, exits
from superfluid.paths import regular_file
from superfluid.release_flags import FOR_VARIABLE
from superfluid.release_flags import add_flags as add_for_flags
from superfluid.runtime.errors import UsageError
from superfluid.runtime.home import home
from superfluid.runtime.installs import current_install, list_installs, read_pinned, runtime_root
from superfluid.runtime.planning import ForRelease, Plan
from superfluid.runtime.upkeep import first_known, same_archives

# Its flags and page are here for every form; two flags make it another install, run by its own
# module (runs_in): --locked (a fleet's builds: install_locked.py) and --for/SUPERFLUID_FOR (planned
# for another release: install_for.py). A plain install so never loads the lock, signature and TUF
# machinery it does not run.

__all__ = ["HELP", "arguments", "runs_in", "run", "install_line", "already_installed"]

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
    p.add_argument("--timings", action="store_true",
                   help="record the install's phases (listing, download, extract, probe, publish): on stderr, "
                        "or with --json as its timings")
    add_json(p)
    add_for_flags(p)


def already_installed(plans: Sequence[Plan], environ: Mapping[str, str]) -> Outcome | None:
    """The install the first plan would make, when it is already here from the same bytes: its
    receipt reads, and records every archive the plan fetches by the digest the plan pins (an
    archive whose digest is not known yet, a ``--from`` file without ``--sha256``, is never
    taken as the same). None: install it.
    """
    first = first_known(plans)
    if first is None:
        return None
    root = runtime_root(home(environ), first.id)
    if not (root / first.install).is_dir():
        return None
    guard_root(root)  # judged as an install would be: never through a link, under the runtime's lock
    with install_mutex(root, on_wait=lambda holder: say(f"another install of {first.id} is running "
                                                        f"({holder.describe()}); waiting for it")):
        settle(root)  # a publish killed before `current` moved to it is finished first (issue 36)
        there = next((i for i in list_installs(root) if i.name == first.install and i.ok), None)
        if there is None or there.receipt is None:
            return None
        if not same_archives(first, there.receipt):
            return None
        return Outcome(first.id, tuple(plans), False, "", receipt=there.receipt, path=str(root / first.install),
                       current=current_install(root), pinned=read_pinned(root), kept=True)  # install() says where from


def _install(args: argparse.Namespace, environ: Mapping[str, str], for_: ForRelease | None) -> int:
    request = request_of(args, for_=for_)
    before = count(args.id, environ)
    with recorded_hint(args, environ):  # named no mirror and cannot list: the one its installs came from
        keep = not getattr(args, "reinstall", False)
        outcome = installed_with(request, args, environ, dry_run=args.dry_run,
                                 kept=(lambda plans: already_installed(plans, environ)) if keep else None)
    if outcome.kept:
        return _kept(outcome, args)
    show(outcome, args, before)
    return 0


def _kept(outcome: Outcome, args: argparse.Namespace) -> int:
    """A second identical install: said, and nothing was fetched or changed (``--reinstall`` forces one)."""
    r = outcome.receipt
    assert r is not None
    if args.json:
        print_json(outcome.to_json())
        return 0
    digests = ", ".join(f"sha256 {s.sha256[:12]}…" for s in r.sources)
    sys.stdout.write(f"superfluid: {r.id} {r.install} is already installed from the same archive ({digests}): "
                     f"nothing was fetched or changed; `superfluid runtime install {r.id} --reinstall` installs it "
                     f"again, `superfluid runtime verify {r.id} {r.install}` checks its files\n")
    return 0


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
    return install_line(args, dict(os.environ), lambda: None)


def install_line(args: argparse.Namespace, environ: Mapping[str, str],
                 planned_for: Callable[[], ForRelease | None]) -> int:
    """``runtime install <id>``, its line checked first, then planned for the release ``planned_for``
    answers (``for_release.release_for``; None: this one).

    Raises:
        UsageError: a bad flag value or runtime id (exit 2).
        SuperfluidError: any run-time failure (exit 1).
    """
    if args.id is None:
        raise UsageError("runtime install needs a runtime id (basert, llamacpp, mlx), or --locked [FILE]")
    check_id(args.id)
    if args.from_ and args.offline and "://" in args.from_ and not args.from_.startswith("file://"):
        raise UsageError("--from URL needs the network, and --offline forbids it: give a local file")
    if args.from_ and "://" not in args.from_:
        local = os.path.expanduser(args.from_)
        if os.path.isdir(local):
            raise UsageError(f"--from {args.from_} is a directory: name the archive file in it "
                             f"(e.g. {os.path.join(args.from_, '<name>.tar.gz')}); --mirror {args.from_} "
                             f"reads a directory of release files")
        regular_file("--from", local)  # a FIFO would hold the open; an unreadable file is named now
    home_holds(args, environ)
    return _install(args, environ, planned_for())
