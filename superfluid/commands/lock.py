"""``superfluid lock``: a fleet's engine builds pinned by digest in ``superfluid.lock``.

See docs/fleet.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from superfluid import __version__
from superfluid.for_release import release_for
from superfluid.install_report import say
from superfluid.installer.errors import ReleaseNotFound
from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.lockfile import Engine, Lock, Target, lock_fix
from superfluid.installer.fleet.plans import (
    Change,
    check_targets,
    compare,
    host_for,
    kinds_of,
    plan_engine,
    targets_of,
)
from superfluid.installer.settings import MIRROR_FLAG, Settings
from superfluid.installer.sources.github import web_base_for
from superfluid.installer.sources.mirror import one_mirror, root_of_url
from superfluid.installer.transport.urls import path_of_file_url
from superfluid.lock_flags import checked_lock
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.release_flags import add_flags as add_for_flags
from superfluid.release_flags import flags_of
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.errors import BadFile, InconsistentRelease, SuperfluidError, UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.output import counted, print_json
from superfluid.runtime.planning import DigestConflict, ForRelease, NotInstallable, Request
from superfluid.settings import settings_of
from superfluid.source_hints import shown

__all__ = ["HELP", "arguments", "run", "LockOutdated", "change_lines"]


class _Planning(NamedTuple):
    """What every plan of one ``superfluid lock`` is made with: the settings, the release ``--for``
    names, and the command that fills the cache (the fix of what ``--offline`` lacks)."""

    settings: Settings
    for_: ForRelease | None
    fill: Fix | None = None

HELP = Help(
    "pin the engine builds of a fleet in superfluid.lock",
    "Write superfluid.lock (TOML): for every runtime x platform x kind of machine (--backend: cpu, cuda, "
    "rocm, vulkan, metal, each a set of declared host facts), the install the installer would choose on "
    "such a machine, with every asset's URL, size and SHA-256 as an install settles them. Engines already "
    "locked are kept; flags add targets. --check says what would move and why (a digest changed under the "
    "same name is an error); --upgrade [ID] writes the new choice. See docs/fleet.md.",
    ("superfluid lock --runtime basert --runtime llamacpp --platform linux-x64 --backend cpu --backend cuda",
     "superfluid lock --check", "superfluid lock --upgrade llamacpp", "superfluid lock --check --json"),
    exits(_0="written or up to date (--check: nothing would move)",
          _1="the network, a release the rules refuse, a broken lock; --check: something would move"),
)


def arguments(p: Parser) -> None:
    p.add_argument("--runtime", action="append", metavar="ID", help="lock this runtime (repeatable; default: all)")
    p.add_argument("--platform", action="append", metavar="P", help="for this platform, e.g. linux-x64 (repeatable)")
    p.add_argument("--backend", action="append", metavar="B",
                   help="for this kind of machine: cpu, cuda, rocm, vulkan, metal (repeatable)")
    p.add_argument("--mirror", metavar="URL|DIR", help="read releases from this mirror (or SUPERFLUID_MIRROR)")
    p.add_argument("--offline", action="store_true", help="read releases from the cache only")
    p.add_argument("--plain-http", action="store_true")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the lock file (default ./superfluid.lock or SUPERFLUID_LOCK)")
    p.add_argument("--check", action="store_true", help="say what would move and why; change nothing")
    p.add_argument("--upgrade", nargs="?", const="", action="append", metavar="ID",
                   help="choose anew (every runtime, or ID's engines) and write it")
    p.add_argument("--require-provenance", action="store_true",
                   help='write provenance = "required": an install from the lock refuses an asset no Sigstore '
                        "bundle proves (kept by every lock after)")
    add_json(p)
    add_for_flags(p)


class LockOutdated(SuperfluidError):
    """``lock --check``: the lock no longer matches what would be chosen now (exit 1)."""


# -- superfluid lock ---------------------------------------------------------------------------------


def _targets(args: argparse.Namespace, old: Lock | None, planning: _Planning
             ) -> tuple[list[Target], bool]:
    """The targets (the old lock's, with the flags added; defaults when neither names a dimension),
    and whether the runtimes were defaulted (every runtime this superfluid ships)."""
    runtimes = sorted(set(old.runtimes if old else ()) | set(args.runtime or ()))
    platforms = sorted(set(old.platforms if old else ()) | set(args.platform or ()))
    backends = sorted(set(old.backends if old else ()) | set(args.backend or ()))
    defaulted = not runtimes
    here = detect(planning.settings.host_environ)
    platforms = platforms or [here.platform]
    if not backends:  # the plain machine, and this one's accelerators where it is one of the platforms
        backends = sorted({"cpu", *(kinds_of(here) if here.platform in platforms else ())})
    return targets_of(runtimes or registry.IDS, platforms, backends), defaulted


def _upgrading(args: argparse.Namespace) -> set[str] | None:
    """The runtimes ``--upgrade`` re-chooses (``{"*"}``: all), or None."""
    if args.upgrade is None:
        return None
    return {u or "*" for u in args.upgrade}


def _plan(target: Target, planning: _Planning) -> Engine:
    request = Request(id=target.runtime, for_=planning.for_)
    return plan_engine(request, target, planning.settings, fill=planning.fill)


def _now(targets: list[Target], planning: _Planning,
         keep: Lock | None, upgrade: set[str] | None,
         failed: dict[Target, SuperfluidError] | None = None) -> dict[Target, Engine | str]:
    """Each target's engine: kept from ``keep`` unless upgraded, else planned now; or why nothing
    of it installs on such a machine (the rules refuse, or nothing is published for it), with the
    refusal itself in ``failed`` when given."""
    out: dict[Target, Engine | str] = {}
    for t in targets:
        kept = keep.engine(t) if keep is not None else None
        if kept is not None and not (upgrade and ({"*", t.runtime} & upgrade)):
            out[t] = kept
            continue
        try:
            out[t] = _plan(t, planning)
        except (NotInstallable, ReleaseNotFound, InconsistentRelease, DigestConflict) as e:
            out[t] = _refusal(e, t)
            if failed is not None:
                failed[t] = e
    return out


def _refusal(e: SuperfluidError, target: Target) -> str:
    """Why nothing of ``target`` is locked, said of the machine asked, not of this one (a planner says
    "this is <host>" of the host it plans for), with its advice in what lock takes (not ``--from``, an
    install's alone; its fixes are commands of an install on this machine, not of a lock: left out)."""
    asked = host_for(target.platform, target.host).describe()
    text = e.message.replace(f"this is {asked}", f"the machine asked is {asked}")
    advice = (e.advice or "").split(", or --from ")[0].split("; or --from ")[0]
    return f"{text}: {advice}" if advice else text


def _nothing_of(runtime: str, failed: Mapping[Target, SuperfluidError]) -> lockfile.LockFileError:
    """The refusal of a lock where nothing of ``runtime`` installs on any machine asked: when each
    machine failed because the source lacks the runtime's releases (no listing), that is the fix,
    not other platforms."""
    why = [e for t, e in failed.items() if t.runtime == runtime]
    if why and all(isinstance(e, ReleaseNotFound) for e in why):
        repo = registry.get(runtime).repo
        advice = f"{why[0].advice or f'the source holds no releases of {repo}'}; or name a mirror that holds " \
                 f"{repo}'s listing with --mirror URL|DIR"
    else:
        advice = "see the reasons above; name other platforms or kinds of machine"
    return lockfile.LockFileError(f"nothing of {runtime} installs on any machine asked: nothing was written",
                                  advice=advice)


def _same_release(planning: _Planning) -> Any:
    def again(old: Engine) -> Engine | None:
        try:
            request = Request(id=old.target.runtime, version=old.version, backend=old.backend,
                              for_=planning.for_)
            engine = plan_engine(request, old.target, planning.settings, fill=planning.fill)
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
           planning: _Planning) -> int:
    now = _now(targets, planning, None, None)
    changes = compare(old, now, _same_release(planning))
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
    outdated = LockOutdated(f"{path} does not match what would be chosen now: {moved} to move, "
                            f"{counted(errors, 'error')}"
                            + (f" (written by superfluid {old.superfluid}, this is {__version__})"
                               if old.superfluid != __version__ else ""),
                            fix=None if errors else lock_fix(path, "--upgrade", does="writes the new choice"),
                            advice="a release changed under its name or vanished: nothing was written" if errors
                            else None)
    # with --json one document: the changes and, the face adds, the error
    outdated.document = {"lock": path, "check": True, "up_to_date": False, "written": False,
                         "engines": [_engine_json(e) for e in old.engines],
                         "changes": [_change_json(c) for c in changes]}
    raise outdated


def _print(doc: dict[str, Any]) -> None:
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
           planning: _Planning) -> int:
    upgrade = _upgrading(args)
    failed: dict[Target, SuperfluidError] = {}
    now = _now(targets, planning, old, upgrade, failed)
    engines = [e for e in now.values() if not isinstance(e, str)]
    not_locked = [{"target": t.describe(), "why": why} for t, why in now.items() if isinstance(why, str)]
    for skipped in not_locked:
        say(f"{skipped['target']}: not locked: {skipped['why']}")
    named = set(args.runtime or ()) | (set(old.runtimes) if old and not defaulted else set())
    for r in sorted(named):
        if not any(e.target.runtime == r for e in engines):
            raise _nothing_of(r, failed)
    if not engines:
        raise lockfile.LockFileError("nothing installs on any machine asked: nothing was written")
    runtimes = sorted({t.runtime for t in targets} if not defaulted else {e.target.runtime for e in engines})
    required = args.require_provenance or (old is not None and old.provenance == "required")  # kept once asked
    new = lockfile.Lock(__version__, tuple(runtimes), tuple(sorted({t.platform for t in targets})),
                        tuple(sorted({t.host for t in targets})), tuple(engines),
                        provenance="required" if required else None)
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
        _print({"lock": path, "check": False, "up_to_date": same, "written": not same,
                "sha256": digest or hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "engines": [_engine_json(e) for e in new.engines], "changes": [_change_json(c) for c in changes],
                "not_locked": not_locked})
        return 0
    if same:
        sys.stdout.write(f"superfluid: {path} is up to date ({len(engines)} engines)\n")
        return 0
    count = counted(len(engines), "engine")
    sys.stdout.write(f"superfluid: wrote {path}: {count} (sha256 {digest})\n")
    for engine in new.engines:
        sys.stdout.write(f"  {engine.target.describe()}: {engine.install} ({engine.chosen_by}"
                         + (f", ABI {engine.abi}" if engine.abi is not None else "") + ")\n")
    return 0


def _old(path: str, args: argparse.Namespace) -> Lock | None:
    """The lock at ``path`` (None when there is none to keep); a bare ``--upgrade`` (every runtime
    chosen anew) writes over one that does not read, saying so.

    Raises:
        BadFile: it does not read (missing, for ``--check``), and no bare ``--upgrade`` replaces it.
    """
    if not (args.check or os.path.exists(path)):
        return None
    try:
        return lockfile.read(path)[0]
    except BadFile as e:
        if "" not in (args.upgrade or ()):
            raise
        say(f"{e.message}: --upgrade writes it anew")
        return None


def _lock_mirror(settings: Settings, old: Lock | None, path: str) -> Settings:
    """``settings``, reading the releases from the mirror every URL of ``old`` names when no mirror
    is named (``--mirror``, ``SUPERFLUID_MIRROR``): a lock written from a mirror is checked and
    refreshed against it, not against GitHub. A lock of GitHub's downloads (or of several roots) is
    read as named.

    Raises:
        LockFileError: that mirror is a folder that is no longer there.
    """
    if settings.mirror or old is None:
        return settings
    root = one_mirror((root_of_url(f.url) for e in old.engines for f in e.files()),
                      github_web=web_base_for(settings.api))
    if root is None:
        return settings
    if root.startswith("file:") and not os.path.isdir(path_of_file_url(root)):
        raise lockfile.LockFileError(f"{path} names the mirror {shown(root)}, which is no longer a directory",
                                     advice="name where its releases are now with --mirror URL|DIR")
    say(f"reading releases from the mirror {shown(root)}, as {path} names it (--mirror names another)")
    return replace(settings, mirror=root + "/", mirror_named_by=MIRROR_FLAG)


def _fill(args: argparse.Namespace, path: str) -> Fix | None:
    """With ``--offline``, the fix of what the cache lacks: the same lock line online."""
    if not args.offline:
        return None
    words = [w for flag, values in (("--runtime", args.runtime), ("--platform", args.platform),
                                     ("--backend", args.backend)) for v in values or () for w in (flag, v)]
    if args.check:
        words.append("--check")
    for u in args.upgrade or ():
        words += ["--upgrade", u] if u else ["--upgrade"]
    does = "fills the cache and checks the lock" if args.check else "fills the cache and writes the lock"
    return lock_fix(path, *words, does=does)


def run(args: argparse.Namespace) -> int:
    """``superfluid lock``.

    Raises:
        UsageError: a bad flag (exit 2), refused before anything is read or looked up.
        LockOutdated: ``--check`` found something that would move (exit 1).
        SuperfluidError: a broken lock, the network, a release the rules refuse (exit 1).
    """
    environ = dict(os.environ)
    if args.check and args.upgrade is not None:
        raise UsageError("--check changes nothing and --upgrade writes: name one")
    check_targets(args.runtime or (), args.platform or (), args.backend or ())
    check_targets([u for u in args.upgrade or () if u], (), ())
    path = checked_lock(args.output, "-o", environ, must_exist=args.check)
    old = _old(path, args)
    settings = _lock_mirror(settings_of(environ, mirror=args.mirror, offline=args.offline,
                                        plain_http=args.plain_http), old, path)
    # --for: lock what that release's compat.json drives
    planning = _Planning(settings, release_for(flags_of(args), settings, environ), _fill(args, path))
    mirror = settings.mirror or ""
    if args.offline and "://" in mirror and not mirror.startswith("file:"):
        say("--offline: the mirror's listings are read from the cache")
    targets, defaulted = _targets(args, old, planning)
    if args.check:
        assert old is not None
        return _check(path, old, targets, args, planning)
    return _write(path, old, targets, defaulted, args, planning)
