"""``superfluid runtimes [--json]``: one row per runtime, what is installed and ready."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from superfluid import answer_cache, catalog
from superfluid.catalog import env_keys, shipped_dirs
from superfluid.installer.home.installs import (
    Installed,
    Verdict,
    judge,
    judge_all,
    list_installs,
    runtime_root,
)
from superfluid.parser import COMMON_EXITS, Help, Parser, add_json
from superfluid.paths import model_path
from superfluid.runtime import registry
from superfluid.runtime.contract import refuse, report_fixes
from superfluid.runtime.hostfacts.host import PROBED
from superfluid.runtime.hostfacts.locate import beside
from superfluid.runtime.hostfacts.system import host_platform
from superfluid.runtime.kernel import fixes
from superfluid.runtime.kernel.errors import BadFile, UsageError, WorkerFailed
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.layout import (
    CURRENT,
    current_target,
    home,
    home_fault,
    install_dir,
    install_receipt,
    runtime_dir,
    runtimes_dir,
)
from superfluid.runtime.kernel.output import json_text, table
from superfluid.runtime.kernel.receipt import provenance_of, read_receipt
from superfluid.runtime.kernel.record import UNRECORDED, verify_install
from superfluid.runtime.probe import install_cpu_fallback
from superfluid.runtimes_report import FIXES, declared, device_cell, model_answer, public, reads_cell

if TYPE_CHECKING:
    import argparse

__all__ = ["HELP", "READS_HOME", "arguments", "run", "rows", "verified_rows", "verified_lines", "answer_vars",
           "depends_on"]

HELP = Help(
    "what is installed and ready here, or which runtime serves a model",
    "One row per runtime: its state (ready, not installed, broken, missing), the default install, its "
    "version and ABI, the newest version that installs here, the model formats it reads, its device and who "
    "checks it. Never touches the network; repeats no check while nothing it depends on changed. With a "
    "model: each runtime's verdict on it (reads it or not, and why, with what its check says of the model), "
    "then the runtime that serves it, as serve would choose, and what it can do.",
    ("superfluid runtimes", "superfluid runtimes --json | jq -r '.[] | select(.ready == true) | .id'",
     "superfluid runtimes --verify --json", "superfluid runtimes tiny.gguf --json | jq -r .serves"),
    ((0, "the table is the answer, even when nothing is ready; with a model: a runtime here serves it"),
     (1, "with a model: no runtime here serves it (each says why)"), (2, COMMON_EXITS[2])),
)
#: the commands that only read the home (see superfluid.cli)
READS_HOME = True
#: variables an answer depends on besides ``SUPERFLUID_*`` and each runtime's ``catalog.env_keys``:
#: where the home is when SUPERFLUID_HOME is unset, and what the interpreter imports
_ANSWER_VARS = ("HOME", "PYTHONPATH", "PYTHONHOME")
#: a row's key (for the text alone) that says its reason ends in advice: its fixes follow as "; or"
_ADVISED = "_advised"
#: how deep the home's runtimes folder is recorded: runtimes/<id>/<install>/<folder>/<file>
_HOME_DEPTH = 4


def arguments(p: Parser) -> None:
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="a model file or directory: which runtime here reads and serves it")
    add_json(p)
    p.add_argument("--verify", action="store_true",
                   help="also check each current install's files against its receipt (reads every file)")


def _current(runtime_id: str, environ: Mapping[str, str]) -> tuple[str | None, Verdict | None, list[Installed]]:
    """The install ``current`` names, its verdict (``installs.judge``, as every command says it),
    and the runtime's installs; or, when ``current`` is not a good link (dangling, a loop, out of the
    home, a file...), ``(None, a broken verdict, [])``. Nothing is followed out of the home."""
    if _homeless(environ) is not None:  # nothing is installed in a home that is not a directory
        return None, None, []
    root = runtime_dir(home(environ), runtime_id)
    name, problem = current_target(root)
    if problem is not None:
        return None, Verdict(CURRENT, "broken", problem, (Fix.superfluid(
            "runtime", "use", runtime_id, "--auto", does="points it at the best install"),)), []
    if name is None:
        return None, None, []
    found = list_installs(root)
    there = next((i for i in found if i.name == name), None)
    if there is None:
        return name, None, found
    return name, judge(runtime_id, there, found, serving=name, platform=host_platform(environ)), found


def _said(verdict: Verdict) -> dict[str, Any]:
    """What a row says of an install that is not ready: ``ready`` (why) and what fixes it."""
    words = verdict.words() if verdict.install != CURRENT else verdict.why or ""
    return {"ready": words, "advice": verdict.advice, "fix": None, "fixes": None, **fixes.as_json(verdict.fixes),
            FIXES: verdict.fixes, _ADVISED: False}


def _homeless(environ: Mapping[str, str]) -> str | None:
    """Why SUPERFLUID_HOME holds nothing (a file, a dangling link, a path under a file), or None."""
    where = home(environ)
    return None if os.path.isdir(where) else home_fault(where)


def _recorded(runtime_id: str, install: str | None, environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """What an install's receipt records of where it came from, by key: ``for`` (the release it was
    made for, from ``--for``), ``lock`` (``{"file", "sha256"}``, from ``install --locked``) and
    ``provenance`` (``receipt.provenance_of``), each when it is an object; {} when there is no install
    or its receipt does not read."""
    if install is None:
        return {}
    try:
        extra = read_receipt(install_receipt(install_dir(home(environ), runtime_id, install))).extra
    except BadFile:
        return {}
    out = {k: extra[k] for k in ("for", "lock") if isinstance(extra.get(k), dict)}
    proven = provenance_of(extra)
    return {**out, "provenance": proven} if proven is not None else out


def _installable(runtime_id: str, environ: Mapping[str, str]) -> tuple[str | None, list[Any]]:
    """The newest version installable here (its install name) and the options, or None/[]."""
    try:
        versions, _, _ = catalog.answer(runtime_id, ["versions", "--json"], environ, accept=(0,))
        options, _, _ = catalog.answer(runtime_id, ["options", "--json"], environ, accept=(0,))
    except WorkerFailed:
        return None, []
    if not isinstance(versions, list) or not isinstance(options, list):
        return None, []
    best = next((v for v in versions if isinstance(v, dict) and v.get("installs") is True), None)
    install = (best.get("install") or best.get("version")) if best else None
    return install if isinstance(install, str) else None, options


def _requires(runtime_id: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """``{"requires": ...}`` from the runtime's compat declaration when it states one, else {}."""
    try:
        compat, _, _ = catalog.answer(runtime_id, ["compat", "--json"], environ, accept=(0,))
    except WorkerFailed:
        return {}
    return {"requires": compat["requires"]} if isinstance(compat, dict) and "requires" in compat else {}


def row(runtime_id: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The JSON row of one runtime: the check's answer, and the verdict of the install ``current``
    names (``installs.judge``) as its state when it is not ``ready``."""
    out: dict[str, Any] = {"id": runtime_id}
    current, verdict, found = _current(runtime_id, environ)
    ref = catalog.locate(runtime_id, environ)
    report: dict[str, Any] | None
    if verdict is not None and verdict.state == "broken" and (verdict.install == CURRENT or not _reads(
            runtime_id, current, found)):  # nothing to ask its worker of
        out.update(state="broken", **_said(verdict))
        report = None
        out["worker"] = ref.to_json() if ref else {"path": "linked", "source": "linked"}
        out.update(_requires(runtime_id, environ))
    elif (nothing := catalog.nothing_to_load(runtime_id, ref, environ)) is not None:
        report = {}
        refuse(report, nothing)  # its check's own words and fixes, and no worker started
    else:
        try:
            report, _, ref = catalog.answer(runtime_id, ["check"], environ)
        except WorkerFailed as e:
            out.update(state="missing", ready=e.reason)
            report, ref = None, None
    recorded = _recorded(runtime_id, current, environ)
    made_for = recorded.get("for")
    if made_for is not None:
        out["for"] = made_for
        stated = report.get("stated") if report is not None else None
        if report is not None and isinstance(stated, dict) and "abi" in stated:
            # installed for another release (--for): judged by that release's ABI, not ours
            report = {**report, "available": True, "abi": stated.get("abi"),
                      "runtime": {"version": stated.get("version")}}
    if report is not None:
        ready = report.get("available", "the worker's check said nothing about availability")
        judged = verdict if verdict is not None and not report.get("named") else None  # BASERT_LIB: not the home's
        out["ready"] = ready
        if ready is not True and (carried := report_fixes(report)):  # the check's commands, as values
            out.update(fixes.as_json(carried), **{FIXES: carried, _ADVISED: ready != report.get("refused")})
        if judged is not None and not judged.ready and (judged.refused or ready is not True):
            # what it serves from is not ready as `runtime list` says, whatever its check
            out.update(_said(judged))
            ready = out["ready"]
        if judged is not None and not judged.ready:
            out["state"] = judged.state
        elif ready is True:
            out["state"] = "ready"
        elif current or report.get("named") or (ref is not None and ref.source != "beside superfluid"):
            out["state"] = "broken"
        else:
            out["state"] = "not installed"
        if ready is not True and (fault := _homeless(environ)) is not None:
            out.update(state="not installed", ready=f"{fault}: nothing is installed there; point SUPERFLUID_HOME "
                                                    "at a directory (it is made when missing)")
        out["worker"] = ref.to_json() if ref else {"path": "linked", "source": "linked"}
        if ready is True:
            version = (report.get("runtime") or {}).get("version")
            out["version"] = version.split(" (")[0] if isinstance(version, str) else None
            out["devices"] = report.get("devices", [])
            if current and not report.get("named") and (cpu := install_cpu_fallback(
                    install_dir(home(environ), runtime_id, current), report)) is not None:
                out["no_gpu"] = cpu  # a GPU build whose library registers no GPU device: never silent
            if "abi" in report:
                out["abi"] = report["abi"]
        if "requires" in report:
            out["requires"] = report["requires"]
    out["state"] = out.get("state", "missing")
    for key in ("advice", "fix", "fixes"):  # present only when something is said
        if out.get(key) is None:
            out.pop(key, None)
    if current:
        out["install"] = current
        if "lock" in recorded:
            out["lock"] = recorded["lock"]
        if "provenance" in recorded:
            out["provenance"] = recorded["provenance"]
    out["installable"], out["options"] = _installable(runtime_id, environ)
    out.update(declared(runtime_id, report, ready=out["ready"] is True, worker=out.get("worker")))
    # keep the documented key order: id, state, ready first
    return {k: out[k] for k in ("id", "state", "ready", *[k for k in out if k not in ("id", "state", "ready")])}


def _reads(runtime_id: str, install: str | None, found: list[Installed]) -> bool:
    """Whether the receipt of ``install`` (one of ``found``, ``list_installs``') reads and describes it
    (a broken one whose receipt does not is not checked)."""
    receipt = next((i.receipt for i in found if i.name == install), None)
    return receipt is not None and receipt.id == runtime_id


def rows(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each runtime's row; a row's ``FIXES`` key holds its fixes as values, for the text (``public``
    leaves it out of the JSON)."""
    return [row(runtime_id, environ) for runtime_id in registry.IDS]


def _worker(worker: dict[str, Any] | None) -> str:
    if not worker:
        return "-"
    if worker.get("source") == "linked":
        return "linked (answers in process)"
    return f"{worker['source']}: {worker['path']}"


def _others(runtime_id: str, current: str | None, environ: Mapping[str, str]) -> str:
    """A line for each install of the runtime other than ``current`` that is not ready, with its
    verdict and what fixes it (the table shows the current one only; ``runtime list`` shows them all)."""
    if _homeless(environ) is not None:
        return ""
    lines = ""
    for _, v in judge_all(runtime_dir(home(environ), runtime_id), runtime_id, serving=current,
                          platform=host_platform(environ)):
        if v.install != current and not v.ready:
            tail = v.remedy()
            lines += (f"{runtime_id}: {v.install} (not the current install) is {v.state}"
                      + (f": {v.why}" if v.why else "") + (f": {tail}" if tail else "") + "\n")
    return lines


def _reason(r: dict[str, Any]) -> str:
    """``<id>: <why it is not ready>[: <advice>; or <fixes>]``: a row's line below the table."""
    found = r.get(FIXES) or ()
    tail = fixes.remedy(r.get("advice"), found)
    joined = "; or " if r.get(_ADVISED) else ": "  # its reason holds its advice (a check's refusal)
    return f"{r['id']}: {r['ready']}" + (f"{joined}{tail}" if tail else "") + "\n"


def _human(found: list[dict[str, Any]], environ: Mapping[str, str]) -> str:
    header = ["RUNTIME", "STATE", "INSTALL", "VERSION", "ABI", "INSTALLABLE", "READS", "DEVICE", "WORKER"]
    body = []
    for r in found:
        abi = r.get("abi", "-") if r.get("state") == "ready" else "-"
        numbered = registry.presentation(r["id"]).numbered_abi  # an ABI it does not state is "unnumbered"
        worker = r.get("worker")
        body.append([r["id"], r["state"], r.get("install") or "-", r.get("version") or "-",
                     "-" if abi is None and not numbered else ("unnumbered" if abi is None else str(abi)),
                     r.get("installable") or "-", reads_cell(r), device_cell(r),
                     _worker(worker)])
    text = table(header, body)
    for r in found:
        if r["ready"] is not True:
            text += _reason(r)
        if r.get("no_gpu"):
            text += f"{r['id']}: {r['no_gpu']}\n"
        text += _others(r["id"], r.get("install"), environ)
    for r in found:
        said = registry.presentation(r["id"]).requires_text(r["requires"]) if "requires" in r else None
        text += f"{said}\n" if said else ""
    fault = _homeless(environ)
    text += f"installed runtimes: {runtimes_dir(home(environ))}\n" if fault is None else \
        f"installed runtimes: none ({fault})\n"
    return text


def _model(model: str, as_json: bool, environ: Mapping[str, str]) -> int:
    """``runtimes <model>``: 0 when a runtime here serves it, 1 when none does."""
    text, doc, serves = model_answer(model, rows(environ), environ)
    sys.stdout.write(json_text(doc) if as_json else text)
    return 0 if serves else 1


def run(args: argparse.Namespace) -> int:
    began = time.time()
    environ = dict(os.environ)
    verify = getattr(args, "verify", False)
    model = getattr(args, "model", None)
    if model is not None:
        if verify:
            raise UsageError("--verify checks the installs, not a model: give one or the other")
        return _model(model_path("model", model), args.json, environ)
    found = rows(environ)
    if verify:  # asked for: reads every file of each current install
        found = verified_rows(found, environ)
    if args.json:
        text = json_text([public(r) for r in found])
    else:
        text = _human(found, environ) + (verified_lines(found) if verify else "")
    if all(r["state"] != "missing" for r in found) and not verify:  # no worker failed: nothing expires by itself
        answer_cache.keep(["runtimes", *(["--json"] if args.json else [])], environ, text, began=began,
                          deps=depends_on(environ), names=answer_vars())
    sys.stdout.write(text)
    return 0


# -- runtimes --verify ---------------------------------------------------------------------------------


def verified_rows(rows: list[dict[str, Any]], environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """``runtimes --verify``: each row with a current install gets ``verified`` (true, or why not);
    a ready install whose files do not match its receipt is ``broken``, its ``ready`` saying so."""
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
        row = {**row, "verified": True if verdict.ok else verdict.summary(named=False, fixed=False)}
        if not verdict.ok and verdict.problem != UNRECORDED and row.get("state") == "ready":
            row.update(state="changed" if verdict.problem is None else "broken", ready=row["verified"],
                       **fixes.as_json([verdict.fix]), **{FIXES: (verdict.fix,)})
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
            lines.append(f"{row['id']}: {verified}")  # the state says why (its fix is below the table)
    return "".join(f"{line}\n" for line in lines)


# -- what the answer depends on, kept with it (superfluid.answer_cache) --------------------------------


def answer_vars() -> list[str]:
    """The names of the variables that change an answer about the runtimes here besides
    ``SUPERFLUID_*`` (host facts included): each runtime's ``catalog.env_keys`` (``PATH``,
    ``LD_LIBRARY_PATH``, ``BASERT_LIB``...) and ``_ANSWER_VARS``. No other variable's value is ever
    an input: a token in the environment changes no answer, and nothing of it is written to the home.
    Kept beside each output by name (asking the adapters again is what a kept output saves)."""
    return sorted({*_ANSWER_VARS, *(k for runtime_id in registry.IDS for k in env_keys(runtime_id))})


def _entries(folder: str, depth: int) -> Iterator[str]:
    """``folder`` and what is in it to ``depth`` levels, links not followed."""
    yield folder
    if depth == 0:
        return
    try:
        with os.scandir(folder) as it:
            found = [(e.path, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return
    for path, is_dir in sorted(found):
        if is_dir:
            yield from _entries(path, depth - 1)
        else:
            yield path


def depends_on(environ: Mapping[str, str]) -> list[str]:
    """The paths an answer about the runtimes here depends on (see the module's docstring)."""
    paths: list[str] = [*_entries(runtimes_dir(home(environ)), _HOME_DEPTH)]
    for folder in shipped_dirs():  # workers beside superfluid, and the libraries searched there
        for searched in beside(folder):
            paths += _entries(searched, 1)
    keys = {k for runtime_id in registry.IDS for k in env_keys(runtime_id)}
    for key, value in environ.items():  # the home itself is not: its runtimes are, its cache is not
        if (key in keys or key.startswith("SUPERFLUID_")) and key not in ("SUPERFLUID_HOME", fixes.ENV_LOG):
            paths += [p for p in value.split(os.pathsep) if os.path.isabs(p)]
    paths += [*PROBED, sys.executable]
    files = [getattr(m, "__file__", None) for name, m in list(sys.modules.items())
             if name.split(".")[0] == "superfluid"]
    folders = {os.path.dirname(f) for f in files if isinstance(f, str)}
    for folder in sorted(folders):
        paths += _entries(folder, 1)
    # byte code is written as modules are first imported: what it is compiled from is recorded instead
    return [p for p in dict.fromkeys(paths) if not p.endswith((".pyc", "__pycache__"))]
