"""``runtime versions <id> --for|--mirror|--offline`` (or their variables): judged for another release, or planned.

See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from superfluid.declarations import READS_HOME, Refusal, ask, show, with_listing
from superfluid.for_release import release_for
from superfluid.installer.errors import ReleaseNotFound
from superfluid.installer.install import plan
from superfluid.installer.settings import Settings
from superfluid.installer.sources.choose import source_for
from superfluid.release_flags import flags_of
from superfluid.runtime import registry
from superfluid.runtime.adapter import compat_part
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.errors import InconsistentRelease, SuperfluidError, UsageError
from superfluid.runtime.kernel.layout import has_install_of, installed_installs
from superfluid.runtime.kernel.ordering import version_key
from superfluid.runtime.planning import DigestConflict, NotInstallable, Request, all_refused, first_published
from superfluid.settings import settings_of
from superfluid.source_hints import shown

__all__ = ["READS_HOME", "run"]


def _where(settings: Settings) -> str:
    """The listing's source as every hint of this line spells it: the mirror as given, or the cache."""
    return f"mirror {shown(settings.mirror)}" if settings.mirror else "the cache"


def _listing_choice(args: argparse.Namespace, settings: Settings,
                    listed: list[str]) -> tuple[dict[str, Any] | Refusal, str] | None:
    """What ``runtime install <id> --dry-run`` would choose from the listing ``--mirror``,
    ``SUPERFLUID_MIRROR`` or ``--offline`` names: (the first plan's JSON, or why nothing installs and
    its fixes; where the listing came from), the listing's versions added to ``listed``. None when no
    such listing is asked for."""
    if settings.mirror is None and not settings.offline:
        return None
    return _planned(Request(id=args.id), settings, listed)[0], _where(settings)


def _planned(request: Request, settings: Settings,
             listed: list[str] | None = None) -> tuple[dict[str, Any] | Refusal, str]:
    """The first plan ``runtime install --dry-run`` makes for ``request`` from the listing (its JSON),
    or why it makes none (its refusal's words and the fixes the same facts allow: ``_allowed``); and
    where the listing came from. ``listed``: the versions the listing offers are added to it.

    Raises:
        DownloadError, OfflineMissing, ReleaseNotFound, BadFile: the listing cannot be read.
    """
    try:
        plans, _, source = plan(request, settings)
    except NotInstallable as e:
        return _allowed(request, e, settings), _where(settings)
    except (InconsistentRelease, DigestConflict, ReleaseNotFound) as e:  # that release, not the listing
        if listed is not None:  # what the listing offers instead
            listed += _versions_of(request.id, source_for(settings))
        return (e.text(fixes=()), e.fixes), _where(settings)
    if source is not None:
        if listed is not None:
            listed += _versions_of(request.id, source)
        else:
            source.close()
    refused = all_refused(plans)  # a plan refused by its needs, or not in the release, is skipped
    if refused is not None:
        return (refused.text(fixes=()), ()), _where(settings)
    first = first_published(plans)
    assert first is not None
    return first.to_json(), _where(settings)


def _versions_of(runtime_id: str, source: Any) -> list[str]:
    """The versions the listing offers, as ``--version`` reads its tags (``v0.3.1`` is ``0.3.1``);
    ``source`` is closed."""
    out = []
    try:
        releases = source.releases(registry.get(runtime_id).repo)
    finally:
        source.close()
    for release in releases:
        try:
            version = Request.parse(runtime_id, version=release.tag).version
        except UsageError:
            continue  # a tag no --version could name
        if version is not None:
            out.append(version)
    return out


def _allowed(request: Request, refusal: NotInstallable, settings: Settings) -> Refusal:
    """``refusal``'s words and the fixes the same facts allow: a fix that installs the version
    ``--untested`` is kept only when its plans are not every one refused here (the host's needs);
    else the words say why that would not install either. The untested plans are made once."""
    words = refusal.text(fixes=())
    untested = [f for f in refusal.fixes if "--untested" in f.argv] if not request.untested else []
    if not untested:
        return words, refusal.fixes
    try:
        plans, _, source = plan(Request(id=request.id, version=request.version or refusal.instead, untested=True),
                                settings)
    except SuperfluidError as e:
        why: str | None = e.message
    else:
        if source is not None:
            source.close()
        refused = all_refused(plans)
        why = refused.message if refused is not None else None
    if why is None:
        return words, refusal.fixes
    return f"{words}; untested it would not install either: {why}", tuple(f for f in refusal.fixes
                                                                          if f not in untested)


def _judged(args: argparse.Namespace, settings: Settings, rows: list[dict[str, Any]],
            chosen: str | None) -> dict[str, dict[str, Any] | Refusal]:
    """Each row's version (but ``chosen``, planned already) planned from the listing as ``runtime
    install <id> --version V --dry-run`` plans it: its first plan's JSON, or why it installs nothing.
    What ``versions`` says of a version is then what ``install`` does with it (issue 35, item 5)."""
    out: dict[str, dict[str, Any] | Refusal] = {}
    for r in rows:
        if r["version"] == chosen:
            continue
        try:
            out[r["version"]] = _planned(Request(id=args.id, version=r["version"]), settings)[0]
        except SuperfluidError as e:  # as install says it: a file of that release not in the cache, offline
            out[r["version"]] = (e.text(fixes=()), e.fixes)
    return out


def _with_listed(runtime_id: str, rows: list[dict[str, Any]], listed: list[str],
                 installed: Any) -> list[dict[str, Any]]:
    """``rows`` and a row for each version the listing offers that the runtime's recipe does not
    pin (``_judged`` then plans it as ``install --version V`` would: an untested build of llama.cpp
    says so, with the ``--untested`` install where the host's facts let it install), newest first."""
    have = {r["version"] for r in rows}
    extra: list[dict[str, Any]] = [{"version": v, "abi": None, "installs": "not planned yet", "install": None,
              "installed": has_install_of(installed, v), "tested": False, "platforms": []}
             for v in dict.fromkeys(listed) if v not in have]
    return sorted([*rows, *extra], key=lambda r: version_key(r["version"]), reverse=True)


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
    listed: list[str] = []
    listing = _listing_choice(args, settings, listed) if for_release is None else None
    if listing is not None:  # the fixes keep the source flags the line gave where they are shown (``show``)
        chosen = listing[0] if isinstance(listing[0], dict) else None
        installed = installed_installs(args.id, settings.home)
        answer = _with_listed(args.id, answer, listed, installed)
        judged = _judged(args, settings, answer, chosen["version"] if chosen else None)
        answer = with_listing(answer, chosen, installed, judged)
    show(args, answer, listing)
    return 0

