"""What ``runtime install``, ``update`` and ``repair`` share: the request their flags make, one install
run with its events and progress, what it says when done, and the mirror the installs came from."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from superfluid.fetch_flags import fetch_config
from superfluid.install_report import event_lines, outcome_lines, plan_lines, say, timing_lines
from superfluid.installer.cache.download import progress_for
from superfluid.installer.config import DEFAULT_GITHUB_API
from superfluid.installer.errors import DownloadError, OfflineMissing
from superfluid.installer.events import Event
from superfluid.installer.home.installs import check_runtime_id, list_installs, runtime_root
from superfluid.installer.home.restore import mirror_of
from superfluid.installer.install import Outcome, install
from superfluid.installer.phases import Phases
from superfluid.installer.sources.github import web_base_for
from superfluid.runtime import registry
from superfluid.runtime.kernel.layout import home, writable_home
from superfluid.runtime.kernel.output import print_json
from superfluid.runtime.planning import ForRelease, Plan, Request
from superfluid.source_hints import shown

__all__ = ["request_of", "check_id", "count", "installed_with", "show", "home_holds", "recorded_mirror",
           "recorded_hint"]


def request_of(args: argparse.Namespace, *, for_: ForRelease | None, **over: Any) -> Request:
    """The install the flags ask for, planned for the release ``for_`` (``for_release.release_for``;
    None: this one); ``over``: what the command decides instead of the flags."""
    source = over.pop("from_", getattr(args, "from_", None))
    if source and "://" not in source:
        source = os.path.abspath(os.path.expanduser(source))
    return Request.parse(
        args.id,
        version=over.pop("version", getattr(args, "want_version", None)),
        backend=over.pop("backend", getattr(args, "backend", None)),
        from_=source,
        sha256=over.pop("sha256", getattr(args, "sha256", None)),
        untested=over.pop("untested", bool(getattr(args, "untested", False))),
        for_=for_,
    )


def check_id(runtime_id: str) -> None:
    """Raises UsageError: not the id of a runtime this release ships (names them)."""
    check_runtime_id(runtime_id)
    registry.get(runtime_id)


def count(runtime_id: str, environ: Mapping[str, str]) -> int:
    """How many good installs the runtime has."""
    return sum(1 for i in list_installs(runtime_root(home(environ), runtime_id)) if i.ok)


def installed_with(request: Request, args: argparse.Namespace, environ: Mapping[str, str], *, dry_run: bool,
                   kept: Callable[[Sequence[Plan]], Outcome | None] | None = None) -> Outcome:
    """One install (``installer.install``) with the flags' source, its events said on stderr (not
    with ``--json``), a progress bar on a terminal, and ``--timings`` kept in ``args.phases``."""

    def tell(event: Event) -> None:
        if not args.json:
            for line in event_lines(event):
                say(line)

    phases = None
    if getattr(args, "timings", False):
        phases = Phases.since_process_start()
        args.phases = phases
    progress = progress_for(sys.stderr, environ=environ, json_mode=args.json)
    try:
        return install(request, environ=environ, mirror=args.mirror, offline=args.offline, dry_run=dry_run,
                       tell=tell, progress=progress, phases=phases, kept=kept, config=fetch_config(args, environ))
    finally:
        progress.close()


def show(outcome: Outcome, args: argparse.Namespace, before: int) -> None:
    """What an install did: its document with ``--json``, its plans (``--dry-run``), or its lines."""
    phases: Phases | None = getattr(args, "phases", None)
    if phases is not None and not args.json:
        sys.stderr.write(timing_lines(phases))
    if args.json:
        doc = outcome.to_json()
        if phases is not None:
            doc["timings"] = phases.to_json()
        print_json(doc)
    elif outcome.dry_run:
        sys.stdout.write(plan_lines(list(outcome.plans), outcome.source))
    else:
        sys.stdout.write(outcome_lines(outcome, installs_before=before))


def home_holds(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Downloads and installs land in the home: one that cannot hold them (a file, not writable, a
    read-only file system) is named before anything is fetched (an offline dry run writes nothing).

    Raises:
        HomeUnusable: it cannot.
    """
    if not (getattr(args, "dry_run", False) and getattr(args, "offline", False)):
        writable_home(environ)


def recorded_mirror(runtime_id: str, environ: Mapping[str, str], install: str | None = None) -> str | None:
    """The mirror root the runtime's installs came from, as their receipts record it
    (``restore.mirror_of``): ``install``'s when it is named and its receipt reads, else the one
    every readable install that records a mirror records; None when there is none, or several."""
    web = web_base_for(environ.get("SUPERFLUID_GITHUB_API") or DEFAULT_GITHUB_API)
    found = list_installs(runtime_root(home(environ), runtime_id))
    named = [i for i in found if i.name == install and i.receipt is not None]
    roots = {mirror_of(i.receipt, github_web=web) for i in (named or found) if i.receipt is not None}
    roots.discard(None)
    return roots.pop() if len(roots) == 1 else None


@contextmanager
def recorded_hint(args: argparse.Namespace, environ: Mapping[str, str]) -> Iterator[None]:
    """When a command that named no mirror cannot read its releases (offline, the cache lacks the
    listing; online, the network failed) and the runtime's installs came from a mirror, the fix
    names that mirror."""
    try:
        yield
    except (OfflineMissing, DownloadError) as e:
        if getattr(args, "mirror", None) or environ.get("SUPERFLUID_MIRROR") or getattr(args, "from_", None):
            raise
        root = recorded_mirror(args.id, environ)
        if root is None:
            raise
        words = ["superfluid", "runtime", args.sub, args.id, *(["--offline"] if args.offline else []),
                 "--mirror", shlex.quote(shown(root))]
        e.fix = (f"the installs of {args.id} here came from the mirror {shown(root)}: `{' '.join(words)}` reads it"
                 + (f"; or {e.fix}" if e.fix else ""))
        raise
