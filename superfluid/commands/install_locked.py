"""``superfluid runtime install [<id>] --locked [FILE]``: install what a fleet's lock names for this machine.

See docs/fleet.md, "Installing from a lock".
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from superfluid.install_report import event_lines, outcome_lines, plan_lines, say
from superfluid.installer.cache.download import progress_for
from superfluid.installer.errors import VerificationError
from superfluid.installer.events import Event
from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.lockfile import Engine
from superfluid.installer.fleet.plans import kinds_of, select
from superfluid.installer.install import Reporter, install_plans
from superfluid.installer.settings import MIRROR_VARIABLE, Settings
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.mirror import mirror_root_url
from superfluid.installer.sources.oci.source import locked_source
from superfluid.installer.sources.release_source import ReleaseSource
from superfluid.installing import check_id
from superfluid.lock_flags import lock_path
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.host import Host, detect
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.output import print_json
from superfluid.settings import settings_of
from superfluid.source_hints import shown

# Its flags and page are runtime install's; the dispatch runs this module for --locked
# (commands/install.py's runs_in).

__all__ = ["run", "install_locked"]


def run(args: argparse.Namespace) -> int:
    """``runtime install --locked``: as ``install_locked``."""
    return install_locked(args, dict(os.environ))


def _refuse_flags(args: argparse.Namespace) -> None:
    for dest, flag in (("want_version", "--version"), ("backend", "--backend"), ("from_", "--from"),
                       ("sha256", "--sha256"), ("untested", "--untested"), ("for_", "--for")):
        if getattr(args, dest, None):
            raise UsageError(f"--locked installs what the lock names: {flag} cannot be given with it",
                             fix="change the lock with `superfluid lock`, or install without --locked")


def _mirror_root(settings: Settings) -> str | None:
    where = settings.mirror
    if where is None:
        return None
    try:
        return mirror_root_url(where)
    except ValueError as e:
        raise UsageError(str(e), fix="give --mirror an http(s):// URL or an existing directory") from None


def _verified(e: Any, path: str, root: str | None) -> SuperfluidError:
    """An install ``--locked`` refused bytes other than the lock's, with the command that finds the
    cause: a mirror directory's files are ``mirror verify``'s to check and ``mirror sync``'s to put
    back (``lock --check`` asks the release, not the mirror, and finds nothing); another mirror is
    the place to look; without one, the release itself changed, ``lock --check``'s question."""
    pins = f"{path} pins {e.expected}; nothing was installed"
    quoted = shlex.quote(path)
    if root is not None and root.startswith("file:"):
        where = shlex.quote(shown(root))
        fix = (f"{pins}: the mirror {shown(root)} holds other bytes than were locked (`superfluid mirror verify "
               f"{where} --lock {quoted}` names every file that differs; `superfluid mirror sync {where} --lock "
               f"{quoted}` fetches them again)")
    elif root is not None:
        fix = (f"{pins}: the mirror {shown(root)} serves other bytes than were locked; fill it again from the lock "
               "(`superfluid mirror sync DIR` or `superfluid mirror push oci://...`, as it was filled), or install "
               "without --mirror from the release")
    else:
        fix = f"{pins}: the source serves other bytes than were locked (`superfluid lock --check` says whether the " \
              "release changed)"
    return VerificationError(e.url, e.what, e.expected, e.got, fix=fix)


def _chosen(args: argparse.Namespace, path: str, environ: Mapping[str, str]
            ) -> tuple[str, Host, dict[str, list[Engine]]]:
    """The lock's digest, this host, and what it installs from the lock, per runtime.

    Raises:
        UsageError: an unknown runtime id (exit 2).
        BadFile, LockFileError: as ``lockfile.read`` and ``plans.select``; a runtime not shipped.
    """
    if args.id is not None:
        check_id(args.id)
    lock, digest = lockfile.read(path)
    host = detect(environ)
    chosen = select(lock, host, args.id, lock_name=path)
    for r in chosen:
        try:
            registry.get(r)
        except UsageError:
            raise lockfile.LockFileError(f"{path} names the runtime {r!r}, which this superfluid does not ship",
                                         fix="install with the superfluid that wrote the lock, or lock again"
                                         ) from None
    return digest, host, chosen


def _notes(path: str, host: Host, chosen: Mapping[str, list[Engine]]) -> None:
    """Say what is installed from where, and when this machine is a better kind than the lock has."""
    kinds = kinds_of(host)
    say(f"installing from {path} for {host.platform} ({', '.join(kinds)} machine)")
    for r, engines in chosen.items():
        if kinds[0] in ("cuda", "rocm", "vulkan") and engines[0].target.host != kinds[0]:
            say(f"note: this is a {kinds[0]} machine, and {path} has no {kinds[0]} engine of {r} for "
                f"{host.platform}: `superfluid lock --platform {host.platform} --backend {kinds[0]}` adds one")


def install_locked(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """``superfluid runtime install [<id>] --locked [FILE]``: the lock's engines for this machine's
    platform and kinds (best first, the others its fallbacks), fetched from the lock's URLs (or the
    same paths below ``--mirror``), each byte checked against the lock's digest. No listing is read.

    Raises:
        UsageError: a flag that chooses (``--version``, ``--backend``...), a bad ``--mirror`` (exit 2).
        BadFile: the lock is missing or malformed (nothing changed).
        LockFileError: the lock has nothing for this platform or runtime (says the command that adds it).
        VerificationError: bytes other than the lock's (names the asset, expected and got).
        SuperfluidError: as ``runtime install`` (exit 1).
    """
    _refuse_flags(args)
    settings = settings_of(environ, mirror=args.mirror, offline=args.offline, plain_http=args.plain_http,
                           json_mode=args.json)
    root = _mirror_root(settings)
    path = lock_path(args.locked or None, environ)
    digest, host, chosen = _chosen(args, path, environ)
    ref = {"file": os.path.abspath(path), "sha256": digest}
    where = f"the lock {path} (sha256 {digest})" + (f", below the mirror {root}" if root else "")
    if not args.json:
        _notes(f"{path} (sha256 {digest})", host, chosen)
    source = _offline_source(path, settings) if args.offline else _registry_source(root, chosen, settings)

    def tell(event: Event) -> None:
        if not args.json:
            for line in event_lines(event):
                say(line)

    results: list[dict[str, Any]] = []
    progress = progress_for(sys.stderr, mode=settings.progress)
    try:
        for r, engines in chosen.items():
            plans = [e.to_plan(root) for e in engines]
            if args.dry_run:
                results.append({"id": r, "dry_run": True, "source": where, "plans": [p.to_json() for p in plans],
                                "warnings": []})
                if not args.json:
                    sys.stdout.write(plan_lines(plans, where))
                continue
            try:
                outcome = install_plans(r, plans, settings, Reporter(tell=tell, progress=progress), where=where,
                                        source=source, untested=not all(p.tested for p in plans),
                                        platform=host.platform, lock=ref, mirror=root)
            except VerificationError as e:
                raise _verified(e, path, root) from None
            results.append(outcome.to_json())
            if not args.json:
                sys.stdout.write(outcome_lines(outcome, installs_before=1))
    finally:
        progress.close()
        if source is not None:
            source.close()
    if args.json:
        print_json({"lock": ref, "platform": host.platform, "kinds": kinds_of(host), "dry_run": bool(args.dry_run),
                    "installs": results})
    return 0


def _registry_source(root: str | None, chosen: Mapping[str, list[Engine]], settings: Settings
                     ) -> ReleaseSource | None:
    """The registry's source when the bytes come from one (``--mirror oci://...``, or a lock whose
    URLs are ``oci://``), else None."""
    engines = [e for es in chosen.values() for e in es]
    if not any(u[:6].lower() == "oci://" for u in [root or "", *(a.url for e in engines for a in e.assets)]):
        return None
    return locked_source(root, [f for e in engines for f in e.files()], settings)


def _offline_source(path: str, settings: Settings) -> ReleaseSource:
    """The cache alone (``--offline``): assets by the lock's digests, never a connection (a source of
    ``SUPERFLUID_MIRROR``'s, if it names one, never of ``--mirror``)."""
    offline = replace(settings, mirror=settings.mirror_variable, mirror_named_by=MIRROR_VARIABLE, offline=True)
    return source_for(offline,
                      fix=f"run `superfluid runtime install --locked {path}` once without --offline")
