"""What ``runtime install``, ``update`` and ``repair`` share: the request their flags make, one install
run with its events and progress, what it says when done, and the mirror the installs came from."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from superfluid.install_report import event_lines, outcome_lines, plan_lines, say, timing_lines
from superfluid.installer.cache.download import progress_for
from superfluid.installer.errors import DownloadError, OfflineMissing
from superfluid.installer.events import Event, Unchecked, Warned
from superfluid.installer.home.installs import check_runtime_id, list_installs, runtime_root
from superfluid.installer.home.restore import mirror_of
from superfluid.installer.install import Outcome, Reporter, install
from superfluid.installer.phases import Phases
from superfluid.installer.settings import Settings
from superfluid.installer.sources.github import web_base_for
from superfluid.runtime import registry
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.layout import home, writable_home
from superfluid.runtime.kernel.ordering import check_backend
from superfluid.runtime.kernel.output import print_json
from superfluid.runtime.planning import ForRelease, Plan, Request
from superfluid.source_hints import shown
from superfluid.verbosity import quiet

__all__ = ["request_of", "check_id", "count", "installed_with", "show", "home_holds", "recorded_mirror",
           "recorded_hint"]


def request_of(runtime_id: str, *, for_: ForRelease | None, version: str | None = None, backend: str | None = None,
               from_: str | None = None, sha256: str | None = None, untested: bool = False) -> Request:
    """The install the flags (or what the command decides instead) ask for, planned for the release
    ``for_`` (``for_release.release_for``; None: this one); a ``from_`` path made absolute."""
    if from_ and "://" not in from_:
        from_ = os.path.abspath(os.path.expanduser(from_))
    if backend is not None:
        check_backend(backend)
    return Request.parse(runtime_id, version=version, backend=backend, from_=from_, sha256=sha256,
                         untested=untested, for_=for_)


def check_id(runtime_id: str) -> None:
    """Raises UsageError: not the id of a runtime this release ships (names them)."""
    check_runtime_id(runtime_id)
    registry.get(runtime_id)


def count(runtime_id: str, home: str) -> int:
    """How many good installs the runtime has in ``home``."""
    return sum(1 for i in list_installs(runtime_root(home, runtime_id)) if i.ok)


def installed_with(request: Request, settings: Settings, *, json_mode: bool, dry_run: bool,
                   phases: Phases | None = None,
                   kept: Callable[[Sequence[Plan]], Outcome | None] | None = None) -> Outcome:
    """One install (``installer.install``) from the settings' source, its events said on stderr (not
    with ``--json``), a progress bar as ``settings.progress`` says, and ``--timings`` on ``phases``."""

    def tell(event: Event) -> None:
        if json_mode or (quiet() and not isinstance(event, (Warned, Unchecked))):
            return  # -q: the warnings of an install, not its notes
        for line in event_lines(event):
            say(line)

    progress = progress_for(sys.stderr, mode=settings.progress)
    try:
        return install(request, settings, Reporter(tell=tell, progress=progress, phases=phases), dry_run=dry_run,
                       kept=kept)
    finally:
        progress.close()


def show(outcome: Outcome, *, json_mode: bool, before: int, phases: Phases | None = None) -> None:
    """What an install did: its document with ``--json``, its plans (``--dry-run``), or its lines;
    with ``--timings``, its ``phases``."""
    if phases is not None and not json_mode:
        sys.stderr.write(timing_lines(phases))
    if json_mode:
        doc = outcome.to_json()
        if phases is not None:
            doc["timings"] = phases.to_json()
        print_json(doc)
    elif outcome.dry_run:
        sys.stdout.write(plan_lines(list(outcome.plans), outcome.source))
    else:
        sys.stdout.write(outcome_lines(outcome, installs_before=before))


def home_holds(environ: Mapping[str, str], *, dry_run: bool, offline: bool) -> None:
    """Downloads and installs land in the home: one that cannot hold them (a file, not writable, a
    read-only file system) is named before anything is fetched (an offline dry run writes nothing).

    Raises:
        HomeUnusable: it cannot.
    """
    if not (dry_run and offline):
        writable_home(home(environ))


def recorded_mirror(runtime_id: str, settings: Settings, install: str | None = None) -> str | None:
    """The mirror root the runtime's installs came from, as their receipts record it
    (``restore.mirror_of``): ``install``'s when it is named and its receipt reads, else the one
    every readable install that records a mirror records; None when there is none, or several."""
    web = web_base_for(settings.api)
    found = list_installs(runtime_root(settings.home, runtime_id))
    named = [i for i in found if i.name == install and i.receipt is not None]
    roots = {mirror_of(i.receipt, github_web=web) for i in (named or found) if i.receipt is not None}
    roots.discard(None)
    return roots.pop() if len(roots) == 1 else None


@contextmanager
def recorded_hint(runtime_id: str, settings: Settings, reads: Callable[[str, str], Fix], *,
                  from_: str | None = None) -> Iterator[None]:
    """When a line of ``runtime_id`` named no mirror (``--mirror``, ``SUPERFLUID_MIRROR``) nor ``--from``
    and cannot read its releases (offline, the cache lacks the listing; online, the network failed) and
    the runtime's installs came from a mirror, its first fix is ``reads(mirror, does)``: the same line
    naming that mirror (the face adds ``--offline`` when the line gave it)."""
    try:
        yield
    except (OfflineMissing, DownloadError) as e:
        if settings.mirror or from_:
            raise
        root = recorded_mirror(runtime_id, settings)
        if root is None:
            raise
        e.fixes = (reads(shown(root), f"reads the mirror the installs of {runtime_id} here came from"), *e.fixes)
        raise
