"""``superfluid runtime install [<id>] --locked [FILE]``: install what a fleet's lock names for this machine.

See docs/fleet.md, "Installing from a lock".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from superfluid.install_report import event_lines, outcome_lines, plan_lines, say
from superfluid.installer.cache.download import progress_for
from superfluid.installer.errors import VerificationError
from superfluid.installer.events import Event
from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.lockfile import Engine, lock_fix
from superfluid.installer.fleet.plans import kinds_of, select
from superfluid.installer.install import Reporter, install_plans
from superfluid.installer.settings import MIRROR_VARIABLE, Settings
from superfluid.installer.sources.choose import mirror_root, source_for
from superfluid.installer.sources.oci.source import locked_source
from superfluid.installer.sources.release_source import ReleaseSource
from superfluid.installing import check_id
from superfluid.lock_flags import checked_lock, mirror_fix
from superfluid.runtime import registry
from superfluid.runtime.adapter import built_by_of
from superfluid.runtime.hostfacts.host import Host, detect
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.output import print_json
from superfluid.runtime.planning import Plan
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
                             advice="change what the lock names, or install without --locked")


def _mirror_root(settings: Settings) -> str | None:
    return None if settings.mirror is None else mirror_root(settings.mirror, named_by=settings.mirror_named_by)


def _verified(e: VerificationError, path: str, root: str | None) -> SuperfluidError:
    """An install ``--locked`` refused bytes other than the lock's, with the command that finds the
    cause: a mirror directory's files are ``mirror verify``'s to check and ``mirror sync``'s to put
    back (``lock --check`` asks the release, not the mirror, and finds nothing); another mirror is
    the place to look; without one, the release itself changed, ``lock --check``'s question."""
    pins = f"{path} pins {e.expected}; nothing was installed"
    if root is not None and root.startswith("file:"):
        folder = shown(root)
        return VerificationError(e.url, e.what, e.expected, e.got,
                                 advice=f"{pins}: the mirror {folder} holds other bytes than were locked",
                                 fix=[mirror_fix("verify", folder, path, does="names every file that differs"),
                                      mirror_fix("sync", folder, path, does="fetches them again")])
    if root is not None:
        return VerificationError(e.url, e.what, e.expected, e.got,
                                 advice=f"{pins}: the mirror {shown(root)} serves other bytes than were locked; fill "
                                        "it again from the lock (mirror sync, or mirror push for a registry, as it "
                                        "was filled), or install without --mirror from the release")
    return VerificationError(e.url, e.what, e.expected, e.got,
                             advice=f"{pins}: the source serves other bytes than were locked",
                             fix=lock_fix(path, "--check", does="says whether the release changed"))


def _chosen(args: argparse.Namespace, path: str, environ: Mapping[str, str]
            ) -> tuple[str, Host, dict[str, list[Engine]], bool]:
    """The lock's digest, this host, what it installs from the lock, per runtime, and whether the lock
    requires provenance (``provenance = "required"``).

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
                                         advice="install with the superfluid that wrote the lock, or lock again"
                                         ) from None
    return digest, host, chosen, lock.provenance == "required"


def _notes(path: str, host: Host, chosen: Mapping[str, list[Engine]]) -> None:
    """Say what is installed from where, and when this machine is a better kind than the lock has."""
    kinds = kinds_of(host)
    say(f"installing from {path} for {host.platform} ({', '.join(kinds)} machine)")
    for r, engines in chosen.items():
        if kinds[0] in ("cuda", "rocm", "vulkan") and engines[0].target.host != kinds[0]:
            say(f"note: this is a {kinds[0]} machine, and {path} has no {kinds[0]} engine of {r} for "
                f"{host.platform}: a lock of --platform {host.platform} --backend {kinds[0]} adds one")


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
                           json_mode=args.json, require_provenance=args.require_provenance)
    root = _mirror_root(settings)
    path = checked_lock(args.locked or None, "--locked", environ)
    digest, host, chosen, required = _chosen(args, path, environ)
    if required:  # the lock's provenance = "required": as --require-provenance
        settings = replace(settings, require_provenance=True)
    ref = {"file": os.path.abspath(path), "sha256": digest}
    where = f"the lock {path} (sha256 {digest})" + (f", below the mirror {root}" if root else "")
    if not args.json:
        _notes(f"{path} (sha256 {digest})", host, chosen)
    source = _offline_source(path, settings, args.id) if args.offline else _registry_source(root, chosen, settings)

    def tell(event: Event) -> None:
        if not args.json:
            for line in event_lines(event):
                say(line)

    results: list[dict[str, Any]] = []
    progress = progress_for(sys.stderr, mode=settings.progress)
    try:
        for r, engines in chosen.items():
            plans = [_built_by(e.to_plan(root)) for e in engines]
            if args.dry_run:
                results.append({"id": r, "dry_run": True, "source": where, "plans": [p.to_json() for p in plans],
                                "warnings": []})
                if not args.json:
                    sys.stdout.write(plan_lines([_as_locked(p, path) for p in plans], where))
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


def _built_by(plan: Plan) -> Plan:
    """``plan`` naming who builds its assets: as its lock recorded it, else (a lock written before
    superfluid recorded it) as its runtime's recipe names it."""
    return plan if plan.built_by is not None else replace(plan, built_by=built_by_of(registry.get(plan.id)))


def _as_locked(plan: Plan, path: str) -> Plan:
    """``plan`` as a dry run from a lock says it: each digest as the lock pins it (no listing was read)."""
    pinned = f"as {path} pins it"
    return replace(plan, assets=tuple(replace(a, digest_source=pinned, checked=()) for a in plan.assets))


def _offline_source(path: str, settings: Settings, runtime_id: str | None) -> ReleaseSource:
    """The cache alone (``--offline``): assets by the lock's digests, never a connection (a source of
    ``SUPERFLUID_MIRROR``'s, if it names one, never of ``--mirror``)."""
    offline = replace(settings, mirror=settings.mirror_variable, mirror_named_by=MIRROR_VARIABLE, offline=True)
    fill = Fix.superfluid("runtime", "install", *((runtime_id,) if runtime_id else ()), "--locked", path,
                          does="fills the cache")
    return source_for(offline, fix=fill)
