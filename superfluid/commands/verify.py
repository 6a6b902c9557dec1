"""``superfluid runtime verify <id> [<install>]``: is an install still what its receipt records?

See docs/install.md, "Verifying an install later".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from superfluid.installer.errors import ProvenanceRefused
from superfluid.installer.home.hints import install_it, list_them
from superfluid.installer.home.installs import check_install_name, check_runtime_id, list_installs, runtime_root
from superfluid.installer.home.store import NoSuchInstall
from superfluid.installer.trust.proving import verify_kept
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError
from superfluid.runtime.kernel.layout import home
from superfluid.runtime.kernel.output import error_doc, print_json
from superfluid.runtime.kernel.receipt import Receipt
from superfluid.runtime.kernel.record import Verification, verify_install

__all__ = ["HELP", "arguments", "run", "verdicts", "verdict_lines", "NotVerified"]

HELP = Help(
    "check an install's files against its receipt",
    "Hash every file of an install (or of every install of the runtime) and compare it with what its receipt "
    "recorded when it was staged: a file missing, changed (size, SHA-256, link target, executable bit) or "
    "added (an extra .so in lib/ counts) is named, with the command that puts it back. An install whose "
    "assets were proven by their Sigstore bundles has those bundles checked again, offline, under the trusted "
    "root it was installed with: one that no longer proves what its receipt records is named. When every file "
    "holds, records their stat facts as they are now (as git's index does), so that an install copied or "
    "touched is changed to a glance once, not for ever; changes nothing else.",
    ("superfluid runtime verify basert", "superfluid runtime verify llamacpp b11642-cpu --json"),
    exits(_0="every file as its receipt records it (and every kept Sigstore bundle proving what it recorded)",
          _1="a file missing, changed or added; a kept bundle that no longer proves its asset; a receipt that "
             "records no files or does not read; no such install"),
)
#: the commands that only read the home (see superfluid.cli)
READS_HOME = True


def arguments(p: Parser) -> None:
    p.add_argument("id")
    p.add_argument("install", nargs="?")
    add_json(p)


class NotVerified(SuperfluidError):
    """An install is not what its receipt records (or cannot be compared with it): exit 1."""


def verdicts(runtime_id: str, install: str | None, environ: Mapping[str, str]) -> list[Verification]:
    """The verdict on ``install`` of ``runtime_id``, or on every install of it.

    Raises:
        BadName: a bad install name.
        NoSuchInstall: no such install, or none installed.
    """
    root = runtime_root(home(environ), runtime_id)
    found = list_installs(root)
    if install is not None:
        check_install_name(install)
        found = [i for i in found if i.name == install]
        if not found:
            present = ", ".join(i.name for i in list_installs(root)) or "none"
            raise NoSuchInstall(f"{runtime_id} has no install {install} (installed: {present})",
                                fix=list_them(runtime_id))
    if not found:
        raise NoSuchInstall(f"{runtime_id} is not installed", fix=install_it(runtime_id))
    out = []
    for i in sorted(found, key=lambda i: i.name):
        out.append(verify_install(runtime_id, i.name, i.path, i.receipt, i.problem, record=True))
    return out


def _receipts(runtime_id: str, environ: Mapping[str, str]) -> dict[str, Receipt | None]:
    """Each install's receipt as it reads now, by install name."""
    return {i.name: i.receipt for i in list_installs(runtime_root(home(environ), runtime_id))}


def reproven(verdict: Verification, receipt: Receipt | None) -> dict[str, Any] | None:
    """The install's provenance checked again, offline (``proving.verify_kept``): ``{"ok", "assets",
    "problem"}``, the assets whose kept bundle proved them; None when its receipt records none."""
    recorded = receipt.extra.get("provenance") if receipt is not None else None
    if not isinstance(recorded, Mapping):
        return None
    names = [str(a.get("name")) for a in recorded.get("assets") or () if isinstance(a, Mapping) and a.get("proven")]
    if not names:
        return None
    try:
        proven = verify_kept(verdict.path, recorded)
    except (ProvenanceRefused, BadFile, ValueError) as e:
        return {"ok": False, "assets": names, "problem": str(e)}
    return {"ok": True, "assets": names, "problem": None,
            "built_by": sorted({f"{p.repository} {p.workflow} at {p.ref}" for p in proven})}


def verdict_lines(verdict: Verification) -> str:
    """One install's verdict for people: what differs, a line a path, or that it is verified."""
    if verdict.ok or verdict.problem is not None:
        return verdict.summary() + "\n" if verdict.ok else ""
    return "".join(f"{verdict.id} {verdict.install}: {d.describe()}\n" for d in verdict.differences)


def _failure(found: list[Verification], proofs: Mapping[str, dict[str, Any] | None]) -> NotVerified | None:
    bad = [v for v in found if not v.ok]
    unproven = [f"{v.id} {v.install}: {p['problem']}" for v in found if (p := proofs.get(v.install)) and not p["ok"]]
    if not bad:
        return NotVerified("; ".join(unproven)) if unproven else None
    if len(bad) == 1 and not unproven:
        return NotVerified(bad[0].summary())
    if len(bad) == 1:
        return NotVerified("; ".join([bad[0].summary(), *unproven]))
    return NotVerified(f"{len(bad)} installs of {bad[0].id} do not match their receipts: "
                       + "; ".join([*(v.summary() for v in bad), *unproven]))


def _proof_line(verdict: Verification, proof: dict[str, Any] | None) -> str:
    """What the check of its kept bundles found, for people (nothing when it keeps none)."""
    if proof is None or not proof["ok"]:
        return ""
    return (f"{verdict.id} {verdict.install}: provenance verified again: built by {', '.join(proof['built_by'])} "
            f"({', '.join(proof['assets'])})\n")


def run(args: argparse.Namespace) -> int:
    """``runtime verify``: print each verdict; exit 1 when any install does not match.

    Raises:
        UsageError: a bad runtime id or install name (exit 2).
        NoSuchInstall: exit 1.
    """
    registry.get(check_runtime_id(args.id))  # an unknown runtime is a usage error
    found = verdicts(args.id, args.install, dict(os.environ))
    receipts = _receipts(args.id, dict(os.environ))
    proofs = {v.install: reproven(v, receipts.get(v.install)) for v in found}
    failure = _failure(found, proofs)
    if args.json:
        doc: dict[str, Any] = {"id": args.id, "ok": failure is None,
                               "installs": [{**v.to_json(), "provenance": proofs[v.install]} for v in found]}
        if failure is not None:
            fixes = (found[0].fix,) if len(found) == 1 and not found[0].ok else ()
            doc.update(error_doc("not-verified", str(failure), 1, fixes=fixes))
        print_json(doc)
    else:
        sys.stdout.write("".join(verdict_lines(v) + _proof_line(v, proofs[v.install]) for v in found))
    if failure is not None:
        sys.stderr.write(f"superfluid: {failure}\n")
        return 1
    return 0
