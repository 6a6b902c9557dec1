"""The line of ``runtime install <id>`` as every form of it runs it: checked, planned, installed or kept.

See docs/cli.md, "`superfluid runtime install <id> [flags]`".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from superfluid.install_report import say
from superfluid.installer.home.installs import current_install, list_installs, read_pinned, runtime_root
from superfluid.installer.home.store import guard_root, settle
from superfluid.installer.home.upkeep import first_known, same_install
from superfluid.installer.install import Outcome
from superfluid.installer.mutex import install_mutex
from superfluid.installer.phases import Phases
from superfluid.installer.settings import Settings
from superfluid.installing import check_id, count, home_holds, installed_with, recorded_hint, request_of, show
from superfluid.paths import regular_file
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.fixes import Fix, render
from superfluid.runtime.kernel.output import print_json
from superfluid.runtime.planning import ForRelease, Plan
from superfluid.settings import settings_of
from superfluid.source_hints import given, with_flags

__all__ = ["install_line", "already_installed"]


def install_line(args: argparse.Namespace, environ: Mapping[str, str],
                 planned_for: Callable[[Settings], ForRelease | None]) -> int:
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
    home_holds(environ, dry_run=args.dry_run, offline=args.offline)
    return _install(args, environ, planned_for)


def already_installed(plans: Sequence[Plan], home: str) -> Outcome | None:
    """The install the first plan would make, when it is already here from the same bytes: its
    receipt reads, and records every archive the plan fetches by the digest the plan pins (an
    archive whose digest is not known yet, a ``--from`` file without ``--sha256``, is never
    taken as the same). None: install it.
    """
    first = first_known(plans)
    if first is None:
        return None
    root = runtime_root(home, first.id)
    if not (root / first.install).is_dir():
        return None
    guard_root(root)  # judged as an install would be: never through a link, under the runtime's lock
    with install_mutex(root, on_wait=lambda holder: say(f"another install of {first.id} is running "
                                                        f"({holder.describe()}); waiting for it")):
        settle(root)  # a publish killed before `current` moved to it is finished first (issue 36)
        there = same_install(first, list_installs(root))
        if there is None:
            return None
        return Outcome(id=first.id, plans=tuple(plans), dry_run=False, source="", receipt=there,
                       path=str(root / first.install),
                       current=current_install(root), pinned=read_pinned(root), kept=True)  # install() says where from


def _install(args: argparse.Namespace, environ: Mapping[str, str],
             planned_for: Callable[[Settings], ForRelease | None]) -> int:
    settings = settings_of(environ, mirror=args.mirror, offline=args.offline, plain_http=args.plain_http,
                           json_mode=args.json, require_provenance=args.require_provenance)
    request = request_of(args.id, for_=planned_for(settings), version=args.want_version, backend=args.backend,
                         from_=args.from_, sha256=args.sha256, untested=args.untested)
    phases = Phases.since_process_start() if args.timings else None
    before = count(args.id, settings.home)
    # named no mirror and cannot list: the one its installs came from
    def reads(mirror: str, does: str) -> Fix:
        return Fix.superfluid("runtime", "install", args.id, *_named(args), "--mirror", mirror, does=does)

    with recorded_hint(args.id, settings, reads, from_=args.from_):
        keep = not args.reinstall
        outcome = installed_with(request, settings, json_mode=args.json, dry_run=args.dry_run, phases=phases,
                                 kept=(lambda plans: already_installed(plans, settings.home)) if keep else None)
    if outcome.kept:
        return _kept(outcome, args)
    show(outcome, json_mode=args.json, before=before, phases=phases)
    return 0


def _named(args: argparse.Namespace) -> list[str]:
    """The flags of the line that say what it installs (``--version``, ``--backend``, ``--from``...), as given."""
    words: list[str] = []
    for flag, value in (("--version", args.want_version), ("--backend", args.backend), ("--from", args.from_),
                        ("--sha256", args.sha256)):
        if value:
            words += [flag, value]
    return words + (["--untested"] if args.untested else []) + (
        ["--require-provenance"] if args.require_provenance else [])


def _kept(outcome: Outcome, args: argparse.Namespace) -> int:
    """A second identical install: said, and nothing was fetched or changed (``--reinstall`` forces one)."""
    r = outcome.receipt
    assert r is not None
    if args.json:
        print_json(outcome.to_json())
        return 0
    digests = ", ".join(f"sha256 {s.sha256[:12]}…" for s in r.sources)
    flags = given(mirror=args.mirror, offline=args.offline, plain_http=args.plain_http)
    again = Fix.superfluid("runtime", "install", r.id, *_named(args), "--reinstall", does="installs it again")
    check = Fix.superfluid("runtime", "verify", r.id, r.install, does="checks its files")
    sys.stdout.write(f"superfluid: {r.id} {r.install} is already installed from the same archive ({digests}): "
                     f"nothing was fetched or changed; {render([with_flags(again, flags), check])}\n")
    return 0
