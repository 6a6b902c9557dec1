"""``superfluid runtime install|update|repair <id>``: plan, verify and install a runtime."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from superfluid.runtime.errors import UsageError
from superfluid.runtime.redact import redact_url

__all__ = ["run", "plan_lines", "outcome_lines", "event_lines", "timing_lines"]

if TYPE_CHECKING:
    from superfluid.installer.install import Event, Outcome
    from superfluid.installer.phases import Phases
    from superfluid.runtime.planning import Plan, Request

_DIGEST_SOURCE = {
    "pin": "pinned in this superfluid's recipe",
    "flag": "as --sha256 names it",
    "release": "the release's .sha256",
    "api": "the listing's digest",
    "computed": "none known: computed and recorded",
    "absent": "not in this release: this plan is skipped",
}


def _err(text: str) -> None:
    sys.stderr.write(f"superfluid: {text}\n")
    sys.stderr.flush()


def _mb(size: int) -> str:
    if not size:
        return ""
    return f", {size / 1e6:.1f} MB" if size >= 100_000 else f", {size / 1e3:.1f} kB"


def _abi(runtime_id: str, abi: int | None) -> str | None:
    """``ABI 2`` or ``unnumbered`` for a runtime whose libraries state ABI numbers; else None."""
    from superfluid.runtime import registry

    return registry.get(runtime_id).abi_words(abi)


def plan_lines(plans: list[Plan], where: str) -> str:
    """The plans of a ``--dry-run`` for people: one paragraph per plan, in the order tried."""
    out = [f"plans for this machine, from {where} (tried in order; nothing was changed):"]
    for i, p in enumerate(plans):
        flag = "" if p.tested else " (UNTESTED with this superfluid)"
        abi = f", {words}" if (words := _abi(p.id, p.abi)) else ""
        out.append(f"{i + 1}. {p.id} {p.install} ({p.chosen_by}{abi}){flag}: {p.why}{_mb(p.size)}")
        for a in p.assets:
            digest = f"sha256 {a.sha256}" if a.sha256 else "no sha256"
            checked = " + ".join(_DIGEST_SOURCE.get(c, c) for c in a.checked) or _DIGEST_SOURCE.get(
                a.digest_source, a.digest_source)
            out.append(f"   from {redact_url(a.url)}")
            out.append(f"     {digest} ({checked})")
    return "\n".join(out) + "\n"


def outcome_lines(outcome: Outcome, *, installs_before: int) -> str:
    """What an install did, for people (stdout)."""
    r = outcome.receipt
    if r is None:
        return ""
    facts = [r.version]
    if (words := _abi(r.id, r.abi)) is not None:
        facts.append(words)
    if not r.tested:
        facts.append("UNTESTED")
    lines = [f"{r.id} {r.install} installed ({', '.join(facts)}, chosen by {r.chosen_by})"
             + (", replacing the one of that name" if outcome.replaced else "")]
    if outcome.current and (outcome.pinned or installs_before > 0 or outcome.current != r.install):
        how = "pinned with `superfluid runtime use`" if outcome.pinned == outcome.current else "the best-ranked"
        lines.append(f"{r.id} serves from {outcome.current} by default ({how})")
    return "".join(f"superfluid: {line}\n" for line in lines)


def _request(args: argparse.Namespace, **over: Any) -> Request:
    from superfluid.commands.for_release import release_for
    from superfluid.runtime.planning import Request

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
        for_=over.pop("for_") if "for_" in over else release_for(args, os.environ),
    )


def _check_id(runtime_id: str) -> None:
    from superfluid.installer.home.store import check_runtime_id
    from superfluid.runtime import registry

    check_runtime_id(runtime_id)
    registry.get(runtime_id)  # UsageError naming the runtimes this release ships


def _count(runtime_id: str, environ: Mapping[str, str]) -> int:
    from superfluid.installer.home.store import list_installs, runtime_root
    from superfluid.runtime.home import home

    return sum(1 for i in list_installs(runtime_root(home(environ), runtime_id)) if i.ok)


def event_lines(event: Event) -> list[str]:
    """What an install tells while it runs, for people (stderr)."""
    p = event.plan
    if event.kind == "trying" and p is not None:
        lead = "installing" if event.index == 0 else "  then, if it does not run:"
        untested = "" if p.tested else " (UNTESTED with this superfluid)"
        return [f"{lead} {p.id} {p.install}: {p.why}{_mb(p.size)}{untested}",
                *(f"  from {redact_url(a.url)}" for a in p.assets)]
    if event.kind == "fell-back" and p is not None:
        if event.reason.endswith("not in this release"):
            return [f"{p.id} {p.install}: {event.reason}; falling back to the next"]
        return [f"{p.id} {p.install} does not run here ({event.reason}); falling back to the next"]
    if event.kind == "warning":
        return [f"warning: {event.reason}"]
    if event.kind == "unchecked":
        return [f"warning: {event.path} has no SHA-256 to check it against: installing a local file unchecked "
                f"(its SHA-256 is {event.sha256})"]
    if event.kind == "waiting" and p is not None:
        return [f"another install of {p.id} is running ({event.holder}); waiting for it"]
    return []


def timing_lines(phases: Phases) -> str:
    """``--timings`` for people (stderr): one line per phase, its start and length in seconds since
    the process started (``start`` covers the interpreter, the imports and the command line)."""
    return "".join(f"superfluid: timing {name:<9} {start:7.3f} s .. {end:7.3f} s  {end - start:7.3f} s\n"
                   for name, start, end in phases.spans())


def already_installed(plans: Sequence[Plan], environ: Mapping[str, str]) -> Outcome | None:
    """The install the first plan would make, when it is already here from the same bytes: its
    receipt reads, and records every archive the plan fetches by the digest the plan pins (an
    archive whose digest is not known yet, a ``--from`` file without ``--sha256``, is never
    taken as the same). None: install it.
    """
    from superfluid.installer.home.store import current_install, guard_root, list_installs, read_pinned, runtime_root
    from superfluid.installer.install import Outcome
    from superfluid.installer.mutex import install_mutex
    from superfluid.runtime.home import home
    from superfluid.runtime.upkeep import first_known, same_archives

    first = first_known(plans)
    if first is None:
        return None
    root = runtime_root(home(environ), first.id)
    if not (root / first.install).is_dir():
        return None
    guard_root(root)  # judged as an install would be: never through a link, under the runtime's lock
    with install_mutex(root, on_wait=lambda holder: _err(f"another install of {first.id} is running "
                                                        f"({holder.describe()}); waiting for it")):
        there = next((i for i in list_installs(root) if i.name == first.install and i.ok), None)
        if there is None or there.receipt is None:
            return None
        if not same_archives(first, there.receipt):
            return None
        return Outcome(first.id, tuple(plans), False, "", receipt=there.receipt, path=str(root / first.install),
                       current=current_install(root), pinned=read_pinned(root), kept=True)  # install() says where from


def _do(request: Request, args: argparse.Namespace, environ: Mapping[str, str], *, dry_run: bool,
        keep: bool = False) -> Outcome:
    from superfluid.installer.cache.download import progress_for
    from superfluid.installer.install import install

    def tell(event: Event) -> None:
        if not args.json:
            for line in event_lines(event):
                _err(line)

    phases = None
    if getattr(args, "timings", False):
        from superfluid.installer.phases import Phases

        phases = Phases.since_process_start()
        args.phases = phases
    progress = progress_for(sys.stderr, environ=environ, json_mode=args.json)
    try:
        return install(request, environ=environ, mirror=args.mirror, offline=args.offline, dry_run=dry_run,
                       tell=tell, progress=progress, phases=phases,
                       kept=(lambda plans: already_installed(plans, environ)) if keep else None)
    finally:
        progress.close()


def _show(outcome: Outcome, args: argparse.Namespace, before: int) -> None:
    from superfluid.output import print_json

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


def _install(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from superfluid.commands.source_hints import recorded_hint

    request = _request(args)
    before = _count(args.id, environ)
    with recorded_hint(args, environ):  # named no mirror and cannot list: the one its installs came from
        outcome = _do(request, args, environ, dry_run=args.dry_run, keep=not getattr(args, "reinstall", False))
    if outcome.kept:
        return _kept(outcome, args)
    _show(outcome, args, before)
    return 0


def _kept(outcome: Outcome, args: argparse.Namespace) -> int:
    """A second identical install: said, and nothing was fetched or changed (``--reinstall`` forces one)."""
    r = outcome.receipt
    assert r is not None
    if args.json:
        from superfluid.output import print_json

        print_json(outcome.to_json())
        return 0
    digests = ", ".join(f"sha256 {s.sha256[:12]}…" for s in r.sources)
    sys.stdout.write(f"superfluid: {r.id} {r.install} is already installed from the same archive ({digests}): "
                     f"nothing was fetched or changed; `superfluid runtime install {r.id} --reinstall` installs it "
                     f"again, `superfluid runtime verify {r.id} {r.install}` checks its files\n")
    return 0


def _default(runtime_id: str, environ: Mapping[str, str]) -> tuple[Any, Any]:
    """The root and the default install of a runtime, or the 'not installed' refusal."""
    from superfluid.installer.home.store import default_install, runtime_root
    from superfluid.runtime.home import home
    from superfluid.runtime.planning import NotInstallable

    root = runtime_root(home(environ), runtime_id)
    current = default_install(root)
    if current is None:
        raise NotInstallable(f"{runtime_id} is not installed",
                             fix=f"`superfluid runtime install {runtime_id}` installs it")
    return root, current


def _update(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Install the newest installable build of the default install's backend family beside it;
    the old install stays (and a pin moves to the new one)."""
    from superfluid.installer.home.store import list_installs, read_pinned
    from superfluid.installer.install import plan
    from superfluid.runtime.home import home, install_receipt
    from superfluid.runtime.receipt import read_receipt
    from superfluid.runtime.upkeep import nothing_to_update, update_wanted

    root, current = _default(args.id, environ)
    old = read_receipt(install_receipt(root / current))
    request = _request(args, **update_wanted(old))
    from superfluid.commands.source_hints import recorded_hint

    with recorded_hint(args, environ):
        plans, _, source = plan(request, environ=environ, mirror=args.mirror, offline=args.offline)
    if source is not None:
        source.close()
    installed = {i.name for i in list_installs(root) if i.ok}
    nothing = nothing_to_update(args.id, current, old, plans[0], installed)
    if nothing is not None:
        return _nothing(args, nothing, current)
    before = len(installed)
    outcome = _do(request, args, environ, dry_run=args.dry_run)
    if not outcome.dry_run and outcome.receipt is not None and read_pinned(root) == current:
        from superfluid.installer.home.store import pin

        pin(home(environ), args.id, outcome.receipt.install)
        if not args.json:
            _err(f"{args.id} serves from {outcome.receipt.install} by default (the pin moved from {current})")
    _show(outcome, args, before)
    if not args.json and not outcome.dry_run:
        _err(f"{args.id} {current} stays installed: `superfluid runtime remove {args.id} {current}` removes it")
    return 0


def _nothing(args: argparse.Namespace, message: str, current: str) -> int:
    from superfluid.commands.source_hints import given, keep_source
    from superfluid.output import print_json

    message = keep_source(message, given(args))
    if args.json:
        print_json({"id": args.id, "dry_run": bool(args.dry_run), "updated": False, "current": current,
                    "why": message, "plans": [], "warnings": []})
    else:
        sys.stdout.write(f"superfluid: {message}\n")
    return 0


def _repair(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Reinstall an install in place from what its receipt says (or its name, when the receipt
    itself is what is broken)."""
    from superfluid.installer.home.store import (
        NoSuchInstall,
        check_install_name,
        current_install,
        default_install,
        list_installs,
        runtime_root,
    )
    from superfluid.runtime.home import home
    from superfluid.runtime.upkeep import repair_target, repair_wanted

    root = runtime_root(home(environ), args.id)
    present = {i.name: i for i in list_installs(root)}
    if args.install is not None:
        check_install_name(args.install)
        target = present.get(args.install)
        if target is None:
            raise NoSuchInstall(f"{args.id} has no install {args.install} "
                                f"(installed: {', '.join(present) or 'none'})",
                                fix=f"`superfluid runtime list {args.id}` lists its installs")
    else:
        target = repair_target(args.id, present, current_install(root), lambda: default_install(root))
    request = _request(args, **repair_wanted(args.id, target.name, target.receipt, target.problem))
    _recorded_source(args, environ, target.name, from_=request.from_)
    outcome = _do(request, args, environ, dry_run=False)
    _show(outcome, args, len(present))
    return 0


def _recorded_source(args: argparse.Namespace, environ: Mapping[str, str], install: str, *,
                     from_: str | None) -> None:
    """A repair that names no source reinstalls from the mirror the install came from, as its
    receipt records it (for a receipt that does not read: the one the runtime's other installs
    record), before GitHub; it says so. Sets ``args.mirror``."""
    from superfluid.commands.source_hints import recorded_mirror, shown

    if from_ or args.mirror or environ.get("SUPERFLUID_MIRROR"):
        return
    root = recorded_mirror(args.id, environ, install)
    if root is not None:
        args.mirror = shown(root)
        if not args.json:
            _err(f"reinstalling {args.id} {install} from the mirror {args.mirror}, the source the receipts of "
                 f"{args.id} here record (--mirror names another)")


def run(args: argparse.Namespace) -> int:
    """Dispatch ``runtime install|update|repair``.

    Raises:
        UsageError: a bad flag value or runtime id (exit 2).
        SuperfluidError: any run-time failure (exit 1).
    """
    environ = dict(os.environ)
    if args.sub == "install" and getattr(args, "locked", None) is not None:
        from superfluid.commands.lock import install_locked

        return install_locked(args, environ)
    if args.id is None:
        raise UsageError("runtime install needs a runtime id (basert, llamacpp, mlx), or --locked [FILE]")
    _check_id(args.id)
    if args.sub == "install":
        if args.from_ and args.offline and "://" in args.from_ and not args.from_.startswith("file://"):
            raise UsageError("--from URL needs the network, and --offline forbids it: give a local file")
        if args.from_ and "://" not in args.from_:
            local = os.path.expanduser(args.from_)
            if os.path.isdir(local):
                raise UsageError(f"--from {args.from_} is a directory: name the archive file in it "
                                 f"(e.g. {os.path.join(args.from_, '<name>.tar.gz')}); --mirror {args.from_} "
                                 f"reads a directory of release files")
            from superfluid.paths import regular_file

            regular_file("--from", local)  # a FIFO would hold the open; an unreadable file is named now
        _home_holds(args, environ)
        return _install(args, environ)
    if args.sub == "update":
        _home_holds(args, environ)
        return _update(args, environ)
    if args.sub == "repair":
        _home_holds(args, environ)
        from superfluid.commands.restore import repair  # verified first: put back only when it differs

        return repair(args, environ, _repair)
    raise UsageError(f"runtime {args.sub}: not a command of this module")


def _home_holds(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Downloads and installs land in the home: one that cannot hold them (a file, not writable, a
    read-only file system) is named before anything is fetched (an offline dry run writes nothing).

    Raises:
        HomeUnusable: it cannot.
    """
    from superfluid.runtime.home import writable_home

    if not (getattr(args, "dry_run", False) and getattr(args, "offline", False)):
        writable_home(environ)
