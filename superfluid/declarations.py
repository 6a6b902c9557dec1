"""What a runtime declares (its versions, its options), asked through the catalog, checked for its shape and
shown: ``runtime options`` and ``runtime versions``, the plain line of which is answered here, without the
listing and ``--for`` machinery of ``commands.versions_planned``."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from superfluid import catalog
from superfluid.runtime import registry
from superfluid.runtime.contract import carried, report_fixes
from superfluid.runtime.kernel.errors import WorkerFailed
from superfluid.runtime.kernel.fixes import Fix, as_json, render
from superfluid.runtime.kernel.layout import has_install_of
from superfluid.runtime.kernel.options import Option
from superfluid.runtime.kernel.ordering import version_key
from superfluid.runtime.kernel.output import print_json, table
from superfluid.source_hints import given, with_flags

if TYPE_CHECKING:
    import argparse

__all__ = ["run", "show", "ask", "versions_text", "with_listing", "options_text", "shape_of",
           "READS_HOME", "Refusal"]

#: the commands that only read the home (see superfluid.cli)
READS_HOME = True

_KINDS = ("int", "float", "bool", "enum", "list", "path")


def _bad_versions(answer: Any) -> str | None:
    if not isinstance(answer, list):
        return "not a list"
    for i, row in enumerate(answer):
        if not isinstance(row, dict) or not isinstance(row.get("version"), str):
            return f"item {i} has no version"
        if row.get("installs") is not True and not isinstance(row.get("installs"), str):
            return f"item {i} ({row['version']}): installs is neither true nor a reason"
        if not (row.get("install") is None or isinstance(row.get("install"), str)):
            return f"item {i} ({row['version']}): install is neither null nor a name"
        if not isinstance(row.get("installed"), bool) or not isinstance(row.get("tested"), bool):
            return f"item {i} ({row['version']}): installed and tested must be true or false"
    return None


def _bad_options(answer: Any) -> str | None:
    if not isinstance(answer, list):
        return "not a list"
    for i, o in enumerate(answer):
        if not isinstance(o, dict) or not isinstance(o.get("name"), str):
            return f"item {i} has no name"
        if o.get("type") not in _KINDS:
            return f"option {o['name']}: type {o.get('type')!r} is none of {', '.join(_KINDS)}"
        if not isinstance(o.get("description"), str):
            return f"option {o['name']} has no description"
    return None


_CHECKS = {"versions": _bad_versions, "options": _bad_options}


def ask(runtime_id: str, what: str, environ: Mapping[str, str]) -> tuple[list[dict[str, Any]], str]:
    """A runtime's ``versions`` or ``options`` answer, checked for its shape; (answer, who answered).

    Raises:
        UsageError: no such runtime.
        WorkerFailed: the worker failed, hung, or answered something else than the list asked for.
    """
    if runtime_id not in registry.IDS:
        registry.get(runtime_id)  # raises: an unknown id is a usage error (exit 2), before any worker starts
    answer, _, ref = catalog.answer(runtime_id, [what, "--json"], environ, accept=(0,))
    who = ref.path if ref else f"the linked {runtime_id} adapter"
    fault = _CHECKS[what](answer)
    if fault is not None:
        name = os.path.basename(ref.path) if ref else runtime_id
        raise WorkerFailed(name, f"answered `{what} --json` with something that is not a {what} list: {fault}")
    return answer, who


def _yes(value: Any) -> str:
    return "yes" if value is True else "no"


#: why a version installs nothing here, and the fixes the same facts allow
Refusal = tuple[str, tuple[Fix, ...]]


def with_listing(rows: list[dict[str, Any]], chosen: Mapping[str, Any] | None, installed: Any,
                 judged: Mapping[str, Mapping[str, Any] | Refusal | str] | None = None) -> list[dict[str, Any]]:
    """``rows`` with the version ``chosen`` (a plan's JSON, what ``install`` would install from the
    listing; None when it installs nothing) marked as installing here as its install, added in version
    order when the recipe does not pin it; and each other version of ``judged`` (what ``install
    --version V`` plans from the listing: a plan's JSON, or why nothing) installing here as that plan's
    install, or not, for that reason. Pure."""
    out = [_judged_row(r, (judged or {}).get(r["version"])) for r in rows]
    if chosen is None:
        return out
    mark = {"installs": True, "install": chosen["install"], "source": "listing", "chosen_by": chosen["chosen_by"]}
    here = [chosen["platform"]] if chosen.get("platform") else []
    # the platforms a listed version has builds for include this one, which the listing offers
    out = [dict(r, **mark, platforms=sorted({*r.get("platforms", []), *here})) if r["version"] == chosen["version"]
           else r for r in out]
    if not any(r["version"] == chosen["version"] for r in rows):
        row = {"version": chosen["version"], "abi": chosen.get("abi"), **mark,
               "installed": has_install_of(installed, chosen["version"]),
               "tested": chosen["tested"], "platforms": here}
        out = sorted([*out, row], key=lambda r: version_key(r["version"]), reverse=True)
    return out


def _judged_row(row: Mapping[str, Any], planned: Mapping[str, Any] | Refusal | str | None) -> dict[str, Any]:
    """``row`` as the listing's plan for its version says (None: as the recipe says): a refusal's
    words and fixes (the recipe's fixes give way to the listing's), or its plan's install."""
    if planned is None:
        return dict(row)
    if isinstance(planned, str):
        planned = (planned, ())
    if isinstance(planned, tuple):
        words, fixes = planned
        out = {k: v for k, v in row.items() if k not in ("fix", "fixes")}
        return dict(out, installs=words, install=None, **({"fixes": carried(fixes)} if fixes else {}))
    row = {k: v for k, v in row.items() if k not in ("fix", "fixes")}
    here = [planned["platform"]] if planned.get("platform") else []
    return dict(row, installs=True, install=planned["install"], tested=planned["tested"],
                platforms=sorted({*row.get("platforms", []), *here}))


def shown_rows(rows: list[dict[str, Any]], flags: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """``rows`` as ``--json`` prints them: each row's fixes keeping the source flags the line gave,
    as ``fix`` (the first command, a shell's words) and ``fixes`` (each as ``argv`` and ``does``)."""
    out = []
    for row in rows:
        fixes = _row_fixes(row, flags)
        row = {k: v for k, v in row.items() if k not in ("fix", "fixes")}
        out.append({**row, **as_json(fixes)})
    return out


def _row_fixes(row: Mapping[str, Any], flags: list[tuple[str, str | None]]) -> list[Fix]:
    """The fixes ``row`` carries, each keeping the source ``flags`` the line gave."""
    return [with_flags(f, flags) for f in report_fixes(row)]


def _fixes_of(row: Mapping[str, Any], flags: list[tuple[str, str | None]]) -> str:
    fixes = _row_fixes(row, flags)
    return f": {render(fixes)}" if fixes else ""


def versions_text(runtime_id: str, rows: list[dict[str, Any]], listing: tuple[Any, str] | None = None,
                  flags: list[tuple[str, str | None]] | None = None) -> str:
    """The human table: VERSION INSTALLS-HERE AS INSTALLED TESTED NOTE, then the reasons (each with
    its fixes, keeping the source ``flags`` the line gave); then what the release listing offers
    (``listing``: the choice, a plan's JSON or a refusal, and where it came from), or, without one,
    that the table holds the recipe's pins only."""
    flags = flags or []
    if not rows:
        return f"the {runtime_id} runtime installs no version on its own\n"
    note = registry.presentation(runtime_id).version_note  # the per-runtime detail is its engine's
    body = [[r["version"], _yes(r["installs"]), r.get("install") or "-", _yes(r["installed"]),
             _yes(r["tested"]), note(r)] for r in rows]
    text = table(["VERSION", "INSTALLS HERE", "AS", "INSTALLED", "TESTED", "NOTE"], body)
    for r in rows:
        if r.get("verdict"):
            text += f"{r['version']}: {r['verdict']}\n"
        for refused in r.get("refused") or ():  # a plan its recorded needs refuse here, before any download
            text += f"{r['version']}: {refused['install']} is refused here: {refused['why']}\n"
    reasons = {r["installs"] for r in rows if r["installs"] is not True}
    pins = "none of the recipe's pins installs here" if listing is None else "none installs here"
    if len(reasons) == 1 and len(rows) > 1 and all(r["installs"] is not True for r in rows):
        text += f"{pins}: {reasons.pop()}\n"
    else:
        for r in rows:
            if r["installs"] is not True:
                text += f"{r['version']} does not install here: {r['installs']}{_fixes_of(r, flags)}\n"
    kept = [r["version"] for r in rows if r["installed"] and r["installs"] is not True]
    if kept:  # an install made from a listing or an archive: say so, not only "does not install here"
        serves = Fix.superfluid("runtimes", does=f"shows what {runtime_id} serves from")
        text += (f"{', '.join(kept)} {'is' if len(kept) == 1 else 'are'} installed here all the same, from a "
                 f"release listing or an archive rather than a pin: {render([serves])}\n")
    if listing is None:
        if any(r.get("source") == "listing" for r in rows):
            return text
        asks = Fix.superfluid("runtime", "install", runtime_id, "--dry-run",
                              does="asks the release listing what it installs here")
        text += (f"these are the versions this superfluid's recipe pins; the release listing may offer more here "
                 f"(by ABI number or tested build): {render([asks])}; so does this command with --mirror URL|DIR "
                 f"(or --offline, from the cache)\n")
    else:
        choice, where = listing
        if isinstance(choice, tuple):
            words, fixes = choice
            tail = f": {render([with_flags(f, flags) for f in fixes])}" if fixes else ""
            text += f"from the release listing ({where}): nothing installs here: {words}{tail}\n"
        else:
            installs = with_flags(Fix.superfluid("runtime", "install", runtime_id,
                                                 does=f"installs {choice['version']} as {choice['install']}"), flags)
            text += f"from the release listing ({where}): {render([installs])} ({choice['why']})\n"
    return text


def shape_of(option: Mapping[str, Any]) -> str:
    """The accepted shape in words, from an option's JSON (``an integer of at least -1``)."""
    try:
        return Option(name=option["name"], kind=option["type"], description=option.get("description", ""),
                      default=option.get("default"),
                      minimum=option.get("minimum"), maximum=option.get("maximum"),
                      values=tuple(option.get("values") or ()),
                      item=option.get("items") or "str").shape()
    except (KeyError, TypeError):
        return str(option.get("type", "?"))


def _default(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def options_text(runtime_id: str, options: list[dict[str, Any]]) -> str:
    """The human table: OPTION DEFAULT ACCEPTS DESCRIPTION, how each is spelled, and how serve
    answers requests at once (``batching_text``)."""
    if not options:
        return f"the {runtime_id} runtime takes no options\n" + batching_text(runtime_id, options)
    body = [[o["name"], _default(o.get("default")), shape_of(o), o.get("description", "")] for o in options]
    text = table(["OPTION", "DEFAULT", "ACCEPTS", "DESCRIPTION"], body)
    first = options[0]["name"]
    return text + (f"on serve: --{runtime_id}-<option> <value> (e.g. --{runtime_id}-{first}); "
                   f"to the worker: --<option> <value>\n") + batching_text(runtime_id, options)


def batching_text(runtime_id: str, options: list[dict[str, Any]]) -> str:
    """Whether serve decodes requests together: a runtime that batches declares the option
    ``parallel`` (docs/adapters.md, "The serving interface"); one that does not answers one request
    at a time."""
    parallel = next((o for o in options if o.get("name") == "parallel"), None)
    if parallel is None:
        return (f"on serve, the {runtime_id} runtime answers one request at a time: the others wait for it "
                f"(serve --queue N)\n")
    return (f"on serve, up to --{runtime_id}-parallel requests (default {_default(parallel.get('default'))}) "
            f"are decoded together, one step for all\n")


def show(args: argparse.Namespace, answer: list[dict[str, Any]], listing: tuple[Any, str] | None = None) -> None:
    """``answer`` as the line asked it: JSON, or the table of ``versions_text`` or ``options_text``."""
    flags = given(mirror=args.mirror, offline=args.offline) if args.sub == "versions" else []
    if args.json:
        print_json(shown_rows(answer, flags) if args.sub == "versions" else answer)
    elif args.sub == "versions":
        sys.stdout.write(versions_text(args.id, answer, listing, flags))
    else:
        sys.stdout.write(options_text(args.id, answer))


def run(args: argparse.Namespace) -> int:
    """``runtime versions|options <id> [--json]``, from what the runtime declares alone (``runtime
    versions`` with ``--for`` or a release listing is superfluid.commands.versions_planned); 0 answered, 1 the
    worker failed, 2 usage."""
    answer, _ = ask(args.id, args.sub, dict(os.environ))
    show(args, answer)
    return 0
