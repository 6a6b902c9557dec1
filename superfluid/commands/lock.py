"""``superfluid lock`` and ``runtime install --locked``: a fleet's engine builds by digest, installed exactly.

See docs/fleet.md, "Installing from a lock".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from superfluid.runtime.errors import SuperfluidError, UsageError

if TYPE_CHECKING:
    from superfluid.installer.fleet.lockfile import Engine, Lock, Target
    from superfluid.installer.fleet.plans import Change
    from superfluid.installer.install import Event
    from superfluid.installer.sources.release_source import ReleaseSource
    from superfluid.runtime.host import Host

__all__ = ["run", "install_locked", "lock_path", "LockOutdated", "change_lines"]


class LockOutdated(SuperfluidError):
    """``lock --check``: the lock no longer matches what would be chosen now (exit 1)."""


def _err(text: str) -> None:
    sys.stderr.write(f"superfluid: {text}\n")
    sys.stderr.flush()


def lock_path(given: str | None, environ: Mapping[str, str]) -> str:
    """The lock file: as given, else ``SUPERFLUID_LOCK``, else ``./superfluid.lock``."""
    from superfluid.installer.fleet.lockfile import DEFAULT_NAME

    return given or environ.get("SUPERFLUID_LOCK") or DEFAULT_NAME


# -- superfluid lock ---------------------------------------------------------------------------------


def _targets(args: argparse.Namespace, old: Lock | None, environ: Mapping[str, str]
             ) -> tuple[list[Target], bool]:
    """The targets (the old lock's, with the flags added; defaults when neither names a dimension),
    and whether the runtimes were defaulted (every runtime this superfluid ships)."""
    from superfluid.installer.fleet.plans import kinds_of, targets_of
    from superfluid.runtime import registry
    from superfluid.runtime.host import detect

    runtimes = sorted(set(old.runtimes if old else ()) | set(args.runtime or ()))
    platforms = sorted(set(old.platforms if old else ()) | set(args.platform or ()))
    backends = sorted(set(old.backends if old else ()) | set(args.backend or ()))
    defaulted = not runtimes
    here = detect(environ)
    platforms = platforms or [here.platform]
    if not backends:  # the plain machine, and this one's accelerators where it is one of the platforms
        backends = sorted({"cpu", *(kinds_of(here) if here.platform in platforms else ())})
    return targets_of(runtimes or registry.IDS, platforms, backends), defaulted


def _upgrading(args: argparse.Namespace) -> set[str] | None:
    """The runtimes ``--upgrade`` re-chooses (``{"*"}``: all), or None."""
    if args.upgrade is None:
        return None
    return {u or "*" for u in args.upgrade}


def _plan(target: Target, args: argparse.Namespace, environ: Mapping[str, str]) -> Engine:
    from superfluid.installer.fleet.plans import plan_engine
    from superfluid.runtime.planning import Request

    request = Request(target.runtime, for_=getattr(args, "for_release", None))
    return plan_engine(request, target, environ=environ, mirror=args.mirror, offline=args.offline)


def _now(targets: list[Target], args: argparse.Namespace, environ: Mapping[str, str],
         keep: Lock | None, upgrade: set[str] | None) -> dict[Target, Engine | str]:
    """Each target's engine: kept from ``keep`` unless upgraded, else planned now; or why nothing
    of it installs on such a machine (the rules refuse, or nothing is published for it)."""
    from superfluid.installer.errors import ReleaseNotFound
    from superfluid.runtime.errors import InconsistentRelease
    from superfluid.runtime.planning import DigestConflict, NotInstallable

    out: dict[Target, Engine | str] = {}
    for t in targets:
        kept = keep.engine(t) if keep is not None else None
        if kept is not None and not (upgrade and ({"*", t.runtime} & upgrade)):
            out[t] = kept
            continue
        try:
            out[t] = _plan(t, args, environ)
        except (NotInstallable, ReleaseNotFound, InconsistentRelease, DigestConflict) as e:
            out[t] = str(e)
    return out


def _same_release(args: argparse.Namespace, environ: Mapping[str, str]) -> Any:
    from dataclasses import replace

    from superfluid.installer.fleet.plans import plan_engine
    from superfluid.runtime.planning import Request

    def again(old: Engine) -> Engine | None:
        try:
            request = Request(old.target.runtime, version=old.version, backend=old.backend,
                              for_=getattr(args, "for_release", None))
            engine = plan_engine(request, old.target, environ=environ, mirror=args.mirror, offline=args.offline)
        except SuperfluidError:
            return None  # its release is gone, or no longer planned: the move says what is chosen
        return replace(engine, target=old.target) if engine.install == old.install else None

    return again


def _short(e: Engine) -> list[str]:
    return [f"{e.install}  {f.name}  sha256 {f.sha256}" for f in e.assets]


def change_lines(changes: list[Change]) -> str:
    """A diff-style report: ``~`` moved, ``+`` new, ``-`` gone, ``!`` an error, then ``-``/``+`` lines."""
    out = []
    for c in changes:
        t = c.target.describe()
        if c.kind == "digest":
            out.append(f"! {t}: ERROR: a file's bytes changed under the same name ({c.why}): its release was "
                       "replaced; find out why before you trust or upgrade it")
            continue
        if c.kind == "gone":
            out.append(f"! {t}: ERROR: nothing installs any more ({c.why})")
            out += [f"  - {line}" for line in _short(c.old)] if c.old else []
            continue
        mark, what = {"moved": ("~", "moved"), "new": ("+", "new"), "changed": ("~", "changed")}[c.kind]
        out.append(f"{mark} {t}: {what}: {c.why}")
        out += [f"  - {line}" for line in _short(c.old)] if c.old else []
        out += [f"  + {line}" for line in _short(c.new)] if c.new else []
    return "".join(line + "\n" for line in out)


def _check(path: str, old: Lock, targets: list[Target], args: argparse.Namespace,
           environ: Mapping[str, str]) -> int:
    from superfluid import __version__
    from superfluid.installer.fleet.plans import compare

    now = _now(targets, args, environ, None, None)
    changes = compare(old, now, _same_release(args, environ))
    as_json = getattr(args, "json", False)
    if not changes:
        if as_json:
            _print({"lock": path, "check": True, "up_to_date": True, "written": False,
                    "engines": [_engine_json(e) for e in old.engines], "changes": []})
        else:
            sys.stdout.write(f"{path}: up to date ({len(old.engines)} engines, as superfluid {__version__} "
                             "would choose them now)\n")
        return 0
    if not as_json:
        sys.stdout.write(change_lines(changes))
    errors = sum(1 for c in changes if c.error)
    moved = len(changes) - errors
    outdated = LockOutdated(f"{path} does not match what would be chosen now: {moved} to move, {errors} error(s)"
                            + (f" (written by superfluid {old.superfluid}, this is {__version__})"
                               if old.superfluid != __version__ else ""),
                            fix="`superfluid lock --upgrade` writes the new choice" if not errors else
                            "a release changed under its name or vanished: nothing was written")
    # with --json one document: the changes and, the face adds, the error
    outdated.document = {"lock": path, "check": True, "up_to_date": False, "written": False,
                         "engines": [_engine_json(e) for e in old.engines],
                         "changes": [_change_json(c) for c in changes]}
    raise outdated


def _print(doc: dict[str, Any]) -> None:
    from superfluid.output import print_json

    print_json(doc)


def _engine_json(e: Engine) -> dict[str, Any]:
    """An engine as ``lock --json`` says it (schema ``lock-result``)."""
    return {"runtime": e.target.runtime, "platform": e.target.platform, "host": e.target.host,
            "install": e.install, "chosen_by": e.chosen_by, "abi": e.abi, "tested": e.tested,
            "files": [{"name": f.name, "sha256": f.sha256} for f in e.assets]}


def _change_json(c: Change) -> dict[str, Any]:
    return {"target": c.target.describe(), "kind": c.kind, "error": c.error, "why": c.why,
            "old": c.old.install if c.old else None, "new": c.new.install if c.new else None}


def _write(path: str, old: Lock | None, targets: list[Target], defaulted: bool, args: argparse.Namespace,
           environ: Mapping[str, str]) -> int:
    from superfluid import __version__
    from superfluid.installer.fleet import lockfile
    from superfluid.installer.fleet.plans import compare

    upgrade = _upgrading(args)
    now = _now(targets, args, environ, old, upgrade)
    engines = [e for e in now.values() if not isinstance(e, str)]
    not_locked = [{"target": t.describe(), "why": why} for t, why in now.items() if isinstance(why, str)]
    for skipped in not_locked:
        _err(f"{skipped['target']}: not locked: {skipped['why']}")
    named = set(args.runtime or ()) | (set(old.runtimes) if old and not defaulted else set())
    for r in sorted(named):
        if not any(e.target.runtime == r for e in engines):
            raise lockfile.LockFileError(f"nothing of {r} installs on any machine asked: nothing was written",
                                     fix="see the reasons above; name other platforms or kinds of machine")
    if not engines:
        raise lockfile.LockFileError("nothing installs on any machine asked: nothing was written")
    runtimes = sorted({t.runtime for t in targets} if not defaulted else {e.target.runtime for e in engines})
    new = lockfile.Lock(__version__, tuple(runtimes), tuple(sorted({t.platform for t in targets})),
                        tuple(sorted({t.host for t in targets})), tuple(engines))
    changes = compare(old, {e.target: e for e in engines}) if old is not None and upgrade else []
    if changes:
        sys.stderr.write(change_lines(changes))
    text = lockfile.dumps(new)
    try:
        with open(path, encoding="utf-8") as f:
            same = f.read() == text
    except (OSError, UnicodeDecodeError):
        same = False
    digest = None
    if not same:
        try:
            digest = lockfile.write(path, new)
        except OSError as e:
            raise lockfile.LockFileError(f"{path}: cannot be written ({e.strerror or e})") from None
    if getattr(args, "json", False):
        import hashlib

        _print({"lock": path, "check": False, "up_to_date": same, "written": not same,
                "sha256": digest or hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "engines": [_engine_json(e) for e in new.engines], "changes": [_change_json(c) for c in changes],
                "not_locked": not_locked})
        return 0
    if same:
        sys.stdout.write(f"superfluid: {path} is up to date ({len(engines)} engines)\n")
        return 0
    count = f"{len(engines)} engine{'' if len(engines) == 1 else 's'}"
    sys.stdout.write(f"superfluid: wrote {path}: {count} (sha256 {digest})\n")
    for engine in new.engines:
        sys.stdout.write(f"  {engine.target.describe()}: {engine.install} ({engine.chosen_by}"
                         + (f", ABI {engine.abi}" if engine.abi is not None else "") + ")\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """``superfluid lock``.

    Raises:
        UsageError: a bad flag (exit 2), refused before anything is read or looked up.
        LockOutdated: ``--check`` found something that would move (exit 1).
        SuperfluidError: a broken lock, the network, a release the rules refuse (exit 1).
    """
    from superfluid.installer.fleet import lockfile
    from superfluid.installer.fleet.plans import check_targets

    environ = dict(os.environ)
    if args.check and args.upgrade is not None:
        raise UsageError("--check changes nothing and --upgrade writes: name one")
    check_targets(args.runtime or (), args.platform or (), args.backend or ())
    check_targets([u for u in args.upgrade or () if u], (), ())
    from superfluid.commands.for_release import release_for

    args.for_release = release_for(args, environ)  # --for: lock what that release's compat.json drives
    if args.offline and args.mirror and "://" in args.mirror and not args.mirror.startswith("file:"):
        _err("--offline: the mirror's listings are read from the cache")
    path = lock_path(args.output, environ)
    old = lockfile.read(path)[0] if args.check or os.path.exists(path) else None
    targets, defaulted = _targets(args, old, environ)
    if args.check:
        assert old is not None
        return _check(path, old, targets, args, environ)
    return _write(path, old, targets, defaulted, args, environ)


# -- superfluid runtime install --locked -------------------------------------------------------------


def _refuse_flags(args: argparse.Namespace) -> None:
    for dest, flag in (("want_version", "--version"), ("backend", "--backend"), ("from_", "--from"),
                       ("sha256", "--sha256"), ("untested", "--untested"), ("for_", "--for")):
        if getattr(args, dest, None):
            raise UsageError(f"--locked installs what the lock names: {flag} cannot be given with it",
                             fix="change the lock with `superfluid lock`, or install without --locked")


def _mirror_root(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    from superfluid.installer.sources.mirror import mirror_root_url

    where = args.mirror or environ.get("SUPERFLUID_MIRROR") or None
    if where is None:
        return None
    try:
        return mirror_root_url(where)
    except ValueError as e:
        raise UsageError(str(e), fix="give --mirror an http(s):// URL or an existing directory") from None


def _verified(e: Any, path: str) -> SuperfluidError:
    from superfluid.installer.errors import VerificationError

    return VerificationError(e.url, e.what, e.expected, e.got,
                             fix=f"{path} pins {e.expected}; nothing was installed: the source serves other bytes "
                                 "than were locked (`superfluid lock --check` says whether the release changed)")


def _chosen(args: argparse.Namespace, path: str, environ: Mapping[str, str]
            ) -> tuple[str, Host, dict[str, list[Engine]]]:
    """The lock's digest, this host, and what it installs from the lock, per runtime.

    Raises:
        UsageError: an unknown runtime id (exit 2).
        BadFile, LockFileError: as ``lockfile.read`` and ``locking.select``; a runtime not shipped.
    """
    from superfluid.installer.fleet import lockfile
    from superfluid.installer.fleet.plans import select
    from superfluid.runtime import registry
    from superfluid.runtime.host import detect

    if args.id is not None:
        from superfluid.commands.install import _check_id

        _check_id(args.id)
    lock, digest = lockfile.read(path)
    host = detect(environ)
    chosen = select(lock, host, args.id, lock_name=path)
    for r in chosen:
        try:
            registry.get(r)
        except UsageError:
            raise lockfile.LockFileError(f"{path} names the runtime {r!r}, which this superfluid does not ship",
                                     fix="install with the superfluid that wrote the lock, or lock again") from None
    return digest, host, chosen


def _notes(path: str, host: Host, chosen: Mapping[str, list[Engine]]) -> None:
    """Say what is installed from where, and when this machine is a better kind than the lock has."""
    from superfluid.installer.fleet.plans import kinds_of

    kinds = kinds_of(host)
    _err(f"installing from {path} for {host.platform} ({', '.join(kinds)} machine)")
    for r, engines in chosen.items():
        if kinds[0] in ("cuda", "rocm", "vulkan") and engines[0].target.host != kinds[0]:
            _err(f"note: this is a {kinds[0]} machine, and {path} has no {kinds[0]} engine of {r} for "
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
    from superfluid.commands.install import event_lines, outcome_lines, plan_lines
    from superfluid.installer.cache.download import progress_for
    from superfluid.installer.errors import VerificationError
    from superfluid.installer.fleet.plans import kinds_of
    from superfluid.installer.install import install_plans
    from superfluid.output import print_json

    _refuse_flags(args)
    root = _mirror_root(args, environ)
    path = lock_path(args.locked or None, environ)
    digest, host, chosen = _chosen(args, path, environ)
    ref = {"file": os.path.abspath(path), "sha256": digest}
    where = f"the lock {path} (sha256 {digest})" + (f", below the mirror {root}" if root else "")
    if not args.json:
        _notes(f"{path} (sha256 {digest})", host, chosen)
    source = _offline_source(path, environ) if args.offline else _registry_source(root, chosen, environ)

    def tell(event: Event) -> None:
        if not args.json:
            for line in event_lines(event):
                _err(line)

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
                raise _verified(e, path) from None
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


def _registry_source(root: str | None, chosen: Mapping[str, list[Engine]], environ: Mapping[str, str]
                     ) -> ReleaseSource | None:
    """The registry's source when the bytes come from one (``--mirror oci://...``, or a lock whose
    URLs are ``oci://``: installer/sources/oci/source.py, imported only then), else None."""
    engines = [e for es in chosen.values() for e in es]
    if not any(u[:6].lower() == "oci://" for u in [root or "", *(a.url for e in engines for a in e.assets)]):
        return None
    from superfluid.installer.sources.oci.source import locked_source

    return locked_source(root, engines, environ)


def _offline_source(path: str, environ: Mapping[str, str]) -> ReleaseSource:
    """The cache alone (``--offline``): assets by the lock's digests, never a connection."""
    from superfluid.installer.sources.choose import source_for

    return source_for(mirror=None, offline=True, environ=environ,
                      fix=f"run `superfluid runtime install --locked {path}` once without --offline")
