"""``superfluid runtime verify`` and ``runtimes --verify``: is an install still what its receipt records?

See docs/install.md, "Verifying an install later".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from superfluid.runtime.errors import SuperfluidError

if TYPE_CHECKING:
    from superfluid.runtime.record import Verdict

__all__ = ["run", "verdicts", "verdict_lines", "verified_rows", "verified_lines", "NotVerified"]


class NotVerified(SuperfluidError):
    """An install is not what its receipt records (or cannot be compared with it): exit 1."""


def verdicts(runtime_id: str, install: str | None, environ: Mapping[str, str]) -> list[Verdict]:
    """The verdict on ``install`` of ``runtime_id``, or on every install of it.

    Raises:
        BadName: a bad install name.
        NoSuchInstall: no such install, or none installed.
    """
    from superfluid.installer.home.store import NoSuchInstall, check_install_name, list_installs, runtime_root
    from superfluid.runtime.home import home
    from superfluid.runtime.record import verify_install

    root = runtime_root(home(environ), runtime_id)
    found = list_installs(root)
    if install is not None:
        check_install_name(install)
        found = [i for i in found if i.name == install]
        if not found:
            present = ", ".join(i.name for i in list_installs(root)) or "none"
            raise NoSuchInstall(f"{runtime_id} has no install {install} (installed: {present})",
                                fix=f"`superfluid runtime list {runtime_id}` lists its installs")
    if not found:
        raise NoSuchInstall(f"{runtime_id} is not installed", fix=f"`superfluid runtime install {runtime_id}`")
    return [verify_install(runtime_id, i.name, i.path, i.receipt, i.problem)
            for i in sorted(found, key=lambda i: i.name)]


def verdict_lines(verdict: Verdict) -> str:
    """One install's verdict for people: what differs, a line a path, or that it is verified."""
    if verdict.ok or verdict.problem is not None:
        return verdict.summary() + "\n" if verdict.ok else ""
    return "".join(f"{verdict.id} {verdict.install}: {d.describe()}\n" for d in verdict.differences)


def _failure(found: list[Verdict]) -> NotVerified | None:
    bad = [v for v in found if not v.ok]
    if not bad:
        return None
    if len(bad) == 1:
        return NotVerified(bad[0].summary())
    return NotVerified(f"{len(bad)} installs of {bad[0].id} do not match their receipts: "
                       + "; ".join(v.summary() for v in bad))


def run(args: argparse.Namespace) -> int:
    """``runtime verify``: print each verdict; exit 1 when any install does not match.

    Raises:
        UsageError: a bad runtime id or install name (exit 2).
        NoSuchInstall: exit 1.
    """
    from superfluid.installer.home.store import check_runtime_id
    from superfluid.output import error_doc, print_json
    from superfluid.runtime import registry

    registry.get(check_runtime_id(args.id))  # an unknown runtime is a usage error
    found = verdicts(args.id, args.install, dict(os.environ))
    failure = _failure(found)
    if args.json:
        doc: dict[str, Any] = {"id": args.id, "ok": failure is None, "installs": [v.to_json() for v in found]}
        if failure is not None:
            doc.update(error_doc("not-verified", str(failure), 1, fix=found[0].fix if len(found) == 1 else None))
        print_json(doc)
    else:
        sys.stdout.write("".join(verdict_lines(v) for v in found))
    if failure is not None:
        sys.stderr.write(f"superfluid: {failure}\n")
        return 1
    return 0


# --- superfluid runtimes --verify -----------------------------------------------------------------------------

def verified_rows(rows: list[dict[str, Any]], environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """``runtimes --verify``: each row with a current install gets ``verified`` (true, or why not);
    a ready install whose files do not match its receipt is ``broken``, its ``ready`` saying so."""
    from superfluid.installer.home.store import list_installs, runtime_root
    from superfluid.runtime.home import home
    from superfluid.runtime.record import UNRECORDED, verify_install

    out = []
    for row in rows:
        name = row.get("install")
        if not name:
            out.append(row)
            continue
        found = next((i for i in list_installs(runtime_root(home(environ), row["id"])) if i.name == name), None)
        if found is None:
            out.append(row)
            continue
        verdict = verify_install(row["id"], name, found.path, found.receipt, found.problem)
        row = {**row, "verified": True if verdict.ok else verdict.summary(named=False)}
        if not verdict.ok and verdict.problem != UNRECORDED and row.get("state") == "ready":
            row.update(state="broken", ready=row["verified"])
        out.append(row)
    return out


def verified_lines(rows: list[dict[str, Any]]) -> str:
    """What ``runtimes --verify`` adds below the table: the verified installs (the others are
    named among the runtimes that are not ready, or here when what is wrong is unknown)."""
    lines = []
    for row in rows:
        verified = row.get("verified")
        if verified is True:
            lines.append(f"{row['id']}: {row['install']} verified: every file as its receipt records it")
        elif isinstance(verified, str) and verified != row.get("ready"):
            lines.append(f"{row['id']}: {verified}")
    return "".join(f"{line}\n" for line in lines)
