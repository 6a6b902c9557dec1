"""``superfluid runtime use <id> <install>|--auto``: which install a runtime serves from by default.

See docs/install.md, "Managing installs".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from superfluid.installer.home.hints import list_them
from superfluid.installer.home.installs import (
    Verdict,
    check_install_name,
    check_runtime_id,
    judge_all,
)
from superfluid.installer.home.store import NoSuchInstall, pin, unpin
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.system import host_platform
from superfluid.runtime.kernel import fixes
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.layout import home, runtime_dir, writable_home
from superfluid.runtime.kernel.output import print_json

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "pin an install as the default, or --auto to unpin",
    "Pin the install a runtime serves from by default ($SUPERFLUID_HOME/runtimes/<id>/pinned), or with "
    "--auto go back to the best-ranked whole one. A broken or changed install (its receipt does not read, or "
    "a file it records is gone or not as recorded) is refused, naming the repair; an untested one (installed "
    "with --untested) is pinned with a warning naming the install this superfluid drives; runtime list names "
    "the installs there are.",
    ("superfluid runtime use basert 0.3.1-cpu", "superfluid runtime use basert --auto",
     "superfluid runtime use basert 0.4.0-cpu --json"),
    exits(_0="pinned (or unpinned; an untested install with a warning)",
          _1="no such install, or a broken or changed one"),
)


def arguments(p: Parser) -> None:
    p.add_argument("id")
    p.add_argument("install", nargs="?")
    p.add_argument("--auto", action="store_true")
    add_json(p)


def _waiting(runtime_id: str) -> Callable[[object], None]:
    def on_wait(holder: object) -> None:
        sys.stderr.write(f"superfluid: another install of {runtime_id} is running "
                         f"({holder.describe()}); waiting for it\n")  # type: ignore[attr-defined]

    return on_wait


def _use(args: argparse.Namespace, home: str, platform: str) -> int:
    if args.auto and args.install:
        raise UsageError(f"runtime use {args.id}: give an install or --auto, not both")
    if args.auto:
        chosen = unpin(home, args.id, on_wait=_waiting(args.id))
        state = _verdict(args.id, chosen, home, platform).state
        return _used(args, chosen, None, state, f"superfluid: {args.id} serves from {chosen} ({state}) by default, "
                                                "the best-ranked")
    if not args.install:
        raise UsageError(f"runtime use {args.id} needs an install or --auto",
                         fix=list_them(args.id))
    judged = _judge(args.id, check_install_name(args.install), home, platform)
    chosen = pin(home, args.id, args.install, on_wait=_waiting(args.id))
    auto = Fix.superfluid("runtime", "use", args.id, "--auto", does="unpins it")
    return _used(args, chosen, chosen, judged, f"superfluid: {args.id} serves from {chosen} ({judged}) by default, "
                                               f"pinned: {fixes.render([auto])}")


def _verdict(runtime_id: str, install: str, home: str, platform: str) -> Verdict:
    judged = judge_all(runtime_dir(home, runtime_id), runtime_id, serving=install, platform=platform)
    return next((v for _, v in judged if v.install == install), Verdict(install, "broken", "it is not installed"))


def _judge(runtime_id: str, install: str, home: str, platform: str) -> str:
    """The verdict of the install to pin (``installs.judge``, as every command says it): a changed
    one is refused; an untested one is pinned, with a warning naming the install this superfluid
    drives; a broken one is the store's to refuse (``store.pin``, under the install lock).

    Raises:
        NoSuchInstall: it is changed (names what, the repair, and the verify that records it as it is).
    """
    verdict = _verdict(runtime_id, install, home, platform)
    if verdict.ready or verdict.state == "broken":
        return verdict.state
    if verdict.state == "changed":
        raise NoSuchInstall(f"{runtime_id} {verdict.words()}; it is not made the default", fix=verdict.fixes)
    tail = f": {fixes.render(verdict.fixes)}" if verdict.fixes else ""  # its advice is serve's
    sys.stderr.write(f"superfluid: warning: {runtime_id} {verdict.words()}; it is made the default as asked{tail}\n")
    return verdict.state


def _used(args: argparse.Namespace, current: str, pinned: str | None, state: str, line: str) -> int:
    """What ``use`` did: the line for people, or with ``--json`` the document (schema ``use-result``)."""
    if getattr(args, "json", False):
        print_json({"id": args.id, "current": current, "pinned": pinned, "state": state})
    else:
        sys.stdout.write(line + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """``runtime use``.

    Raises:
        UsageError: a bad runtime id or install name, or an install with ``--auto`` (exit 2).
        NoSuchInstall, MutexBusy, StoreError: exit 1.
    """
    check_runtime_id(args.id)
    registry.get(args.id)
    where = writable_home(home(os.environ))  # a file, an unwritable or read-only home: named, before anything
    return _use(args, where, host_platform(os.environ))
