"""``runtime versions <id> --for|--mirror|--offline`` (or their variables): judged for another release, or planned.

See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from superfluid.declarations import READS_HOME, ask, show, with_listing
from superfluid.for_release import release_for
from superfluid.installer.install import plan
from superfluid.installer.settings import Settings
from superfluid.release_flags import flags_of
from superfluid.runtime import registry
from superfluid.runtime.adapter import compat_part
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.errors import InconsistentRelease, SuperfluidError
from superfluid.runtime.kernel.layout import installed_installs
from superfluid.runtime.planning import DigestConflict, NotInstallable, Request, first_published
from superfluid.settings import settings_of

__all__ = ["READS_HOME", "run"]


def _listing_choice(args: argparse.Namespace, settings: Settings) -> tuple[dict[str, Any] | str, str] | None:
    """What ``runtime install <id> --dry-run`` would choose from the listing ``--mirror``,
    ``SUPERFLUID_MIRROR`` or ``--offline`` names: (the first plan's JSON, or why nothing installs;
    where the listing came from). None when no such listing is asked for."""
    if settings.mirror is None and not settings.offline:
        return None
    found = _planned(Request(id=args.id), settings)
    return found if isinstance(found[0], dict) else (found[0], settings.mirror or "the cache")


def _planned(request: Request, settings: Settings) -> tuple[dict[str, Any] | str, str]:
    """The first plan ``runtime install --dry-run`` makes for ``request`` from the listing (its JSON),
    or why it makes none (its refusal's words); and where the listing came from.

    Raises:
        DownloadError, OfflineMissing, ReleaseNotFound, BadFile: the listing cannot be read.
    """
    try:
        plans, where, source = plan(request, settings)
    except (NotInstallable, InconsistentRelease, DigestConflict) as e:
        return str(e), settings.mirror or "the cache"
    if source is not None:
        source.close()
    first = first_published(plans)  # a plan refused by its needs, or not in the release, is skipped
    if first is None:
        return "; ".join(f"{p.install}: {p.refused or 'not in this release'}" for p in plans), where
    return first.to_json(), where


def _judged(args: argparse.Namespace, settings: Settings, rows: list[dict[str, Any]],
            chosen: str | None) -> dict[str, dict[str, Any] | str]:
    """Each row's version (but ``chosen``, planned already) planned from the listing as ``runtime
    install <id> --version V --dry-run`` plans it: its first plan's JSON, or why it installs nothing.
    What ``versions`` says of a version is then what ``install`` does with it (issue 35, item 5)."""
    out: dict[str, dict[str, Any] | str] = {}
    for r in rows:
        if r["version"] == chosen:
            continue
        try:
            out[r["version"]] = _planned(Request(id=args.id, version=r["version"]), settings)[0]
        except SuperfluidError as e:  # as install says it: a file of that release not in the cache, offline
            out[r["version"]] = str(e)
    return out


def run(args: argparse.Namespace) -> int:
    """``runtime versions <id> --for|--mirror|--offline``; 0 answered, 1 the worker failed, 2 usage."""
    environ = dict(os.environ)
    settings = settings_of(environ, mirror=args.mirror, offline=args.offline, plain_http=False)
    for_release = release_for(flags_of(args), settings, environ)
    if for_release is not None:  # --for: the adapter's verdicts for that release's compat document
        adapter = registry.get(args.id)
        part = compat_part(adapter, Request(id=args.id, for_=for_release))
        answer = adapter.versions(detect(settings.host_environ), installed_installs(args.id, settings.home), part)
    else:
        answer, _ = ask(args.id, "versions", environ)
    listing = _listing_choice(args, settings) if for_release is None else None
    if listing is not None:
        chosen = listing[0] if not isinstance(listing[0], str) else None
        judged = _judged(args, settings, answer, chosen["version"] if chosen else None)
        answer = with_listing(answer, chosen, installed_installs(args.id, settings.home), judged)
    show(args, answer, listing)
    return 0
