"""``superfluid runtime install <id>``: plan, verify and install a runtime (``--locked``: a fleet's builds).

See docs/fleet.md, "Installing from a lock".
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.commands.lock import lock_path
from superfluid.fetch_flags import fetch_config
from superfluid.for_release import add_flags as add_for_flags
from superfluid.install_report import event_lines, outcome_lines, plan_lines, say
from superfluid.installer.cache.download import progress_for
from superfluid.installer.errors import VerificationError
from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.lockfile import Engine
from superfluid.installer.fleet.plans import kinds_of, select
from superfluid.installer.home.store import guard_root, settle
from superfluid.installer.install import Event, Outcome, install_plans
from superfluid.installer.mutex import install_mutex
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.mirror import mirror_root_url
from superfluid.installer.sources.oci.source import locked_source
from superfluid.installer.sources.release_source import ReleaseSource
from superfluid.installing import check_id, count, home_holds, installed_with, recorded_hint, request_of, show
from superfluid.output import print_json
from superfluid.parser import RUNTIME_IDS, Help, Parser, add_json, exits
from superfluid.paths import regular_file
from superfluid.runtime import registry
from superfluid.runtime.errors import SuperfluidError, UsageError
from superfluid.runtime.home import home
from superfluid.runtime.host import Host, detect
from superfluid.runtime.installs import current_install, list_installs, read_pinned, runtime_root
from superfluid.runtime.planning import Plan
from superfluid.runtime.upkeep import first_known, same_archives
from superfluid.source_hints import shown

__all__ = ["HELP", "arguments", "run", "already_installed", "install_locked"]

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


def _install(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    request = request_of(args)
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


def run(args: argparse.Namespace) -> int:
    """``runtime install``.

    Raises:
        UsageError: a bad flag value or runtime id (exit 2).
        SuperfluidError: any run-time failure (exit 1).
    """
    environ = dict(os.environ)
    if getattr(args, "locked", None) is not None:
        return install_locked(args, environ)
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
    return _install(args, environ)


# -- superfluid runtime install --locked -------------------------------------------------------------


def _refuse_flags(args: argparse.Namespace) -> None:
    for dest, flag in (("want_version", "--version"), ("backend", "--backend"), ("from_", "--from"),
                       ("sha256", "--sha256"), ("untested", "--untested"), ("for_", "--for")):
        if getattr(args, dest, None):
            raise UsageError(f"--locked installs what the lock names: {flag} cannot be given with it",
                             fix="change the lock with `superfluid lock`, or install without --locked")


def _mirror_root(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    where = args.mirror or environ.get("SUPERFLUID_MIRROR") or None
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
    root = _mirror_root(args, environ)
    path = lock_path(args.locked or None, environ)
    digest, host, chosen = _chosen(args, path, environ)
    ref = {"file": os.path.abspath(path), "sha256": digest}
    where = f"the lock {path} (sha256 {digest})" + (f", below the mirror {root}" if root else "")
    if not args.json:
        _notes(f"{path} (sha256 {digest})", host, chosen)
    source = _offline_source(path, environ) if args.offline else _registry_source(root, chosen, environ, args)

    def tell(event: Event) -> None:
        if not args.json:
            for line in event_lines(event):
                say(line)

    results: list[dict[str, Any]] = []
    progress = progress_for(sys.stderr, environ=environ, json_mode=args.json)
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
                outcome = install_plans(r, plans, environ=environ, where=where, source=source,
                                        untested=not all(p.tested for p in plans), tell=tell, progress=progress,
                                        platform=host.platform, lock=ref)
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


def _registry_source(root: str | None, chosen: Mapping[str, list[Engine]], environ: Mapping[str, str],
                     args: argparse.Namespace) -> ReleaseSource | None:
    """The registry's source when the bytes come from one (``--mirror oci://...``, or a lock whose
    URLs are ``oci://``), else None."""
    engines = [e for es in chosen.values() for e in es]
    if not any(u[:6].lower() == "oci://" for u in [root or "", *(a.url for e in engines for a in e.assets)]):
        return None
    return locked_source(root, [f for e in engines for f in e.files()], environ, fetch_config(args, environ))


def _offline_source(path: str, environ: Mapping[str, str]) -> ReleaseSource:
    """The cache alone (``--offline``): assets by the lock's digests, never a connection."""
    return source_for(mirror=None, offline=True, environ=environ,
                      fix=f"run `superfluid runtime install --locked {path}` once without --offline")
