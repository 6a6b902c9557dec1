"""``superfluid runtime check <id>``: a runtime's check, its options checked before any worker starts."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid import catalog
from superfluid.optionflags import check_runtime_options, culprit_message, find_culprits, parse_flag_pairs, worker_argv
from superfluid.parser import Help, Parser, exits
from superfluid.paths import model_path
from superfluid.runtime import registry
from superfluid.runtime.contract import report_fixes
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.fixes import Fix, render
from superfluid.runtime.kernel.output import error_doc, print_json, table

__all__ = ["HELP", "arguments", "run", "more_help", "split_args", "read_options", "options_help"]

HELP = Help(
    "probe a runtime with options (checked before any worker starts)",
    "Ask the runtime's check, with options. Every option value is checked against the runtime's "
    "declaration before any worker starts; when the check fails with options and passes without them, "
    "the options at fault are named. Options are spelled --<option> V or, as on serve, --<id>-<option> V "
    "(--basert-lib P, --llamacpp-lib P); 'superfluid runtime check <id> --help' lists the runtime's options.",
    ("superfluid runtime check basert --basert-lib ./build/libbaseRT.so",
     "superfluid runtime check llamacpp --model tiny.gguf --n-gpu-layers 0 --json"),
    exits(_0="available (and, with --model, the model reads)",
          _1="not available here, or the model does not read (the reason on stderr; with --json the report's "
             "error: not-available, model-unreadable, model-not-servable)",
          _2="a usage error: a bad flag or option value, a --model that is a FIFO, a device or not readable"),
)
#: the commands that only read the home (see superfluid.cli)
READS_HOME = True


def arguments(p: Parser) -> None:
    p.add_argument("id")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="--model PATH, --json and --<option> <value> pairs")


def more_help(args: argparse.Namespace) -> str:
    """What ``runtime check <id> --help`` adds to its page (``-h`` is one of its own flags there): the
    options that runtime takes.

    Raises:
        UsageError: no such runtime.
    """
    return options_help(args.id)


def split_args(tokens: Sequence[str], runtime_id: str | None = None) -> tuple[str | None, bool, list[tuple[str, str]]]:
    """``--model``, ``--json`` and the option pairs of the command line.

    Raises:
        UsageError: a stray argument or a flag without its value (with ``runtime_id``: a last flag
            that is none of its options is named as such, not as one that lacks its value).
    """
    model: str | None = None
    as_json = False
    rest: list[str] = []
    tokens = list(tokens)
    while tokens:
        token = tokens.pop(0)
        if token == "--json":
            as_json = True
        elif token == "--model" or token.startswith("--model="):
            _, eq, value = token.partition("=")
            if not eq:
                if not tokens:
                    raise UsageError("--model needs a path")
                value = tokens.pop(0)
            model = value
        else:
            rest.append(token)
    if runtime_id is not None and rest and rest[-1].startswith("--") and "=" not in rest[-1]:
        name = rest[-1][2:]
        if name.removeprefix(f"{runtime_id}-") not in {o.name for o in _declared(runtime_id)}:
            read_options(runtime_id, [(name, "")])  # raises: "--x: no such option (this runtime takes: ...)"
    return model, as_json, parse_flag_pairs(rest)


def _declared(runtime_id: str) -> list[Any]:
    return list(registry.get(runtime_id).options())


def read_options(runtime_id: str, pairs: Sequence[tuple[str, str]]) -> tuple[dict[str, Any], list[str]]:
    """The checked option values, and the worker line that forwards them.

    ``--<id>-<name>`` (serve's spelling) is ``--<name>``. Every option is forwarded as it was spelled,
    which every worker takes (docs/adapters.md, "The worker contract"), so that what the worker says
    of a flag (the report's ``named``) is the flag as given.

    Raises:
        UsageError: an option the runtime does not take, a value of the wrong shape, or one option
            given in both spellings.
    """
    lead = f"{runtime_id}-"
    plain = [(n, v) for n, v in pairs if not n.startswith(lead)]
    prefixed = [(n[len(lead):], v) for n, v in pairs if n.startswith(lead)]
    values = check_runtime_options(runtime_id, plain)
    spelled = check_runtime_options(runtime_id, prefixed, prefix=lead)
    for name in values.keys() & spelled.keys():
        raise UsageError(f"--{lead}{name} and --{name} name the same option: give one")
    values.update(spelled)
    argv: list[str] = []
    for name, value in values.items():
        argv += worker_argv({name: value}, prefix=lead if name in spelled else "")
    return values, argv


def options_help(runtime_id: str) -> str:
    """The options ``runtime check <id>`` takes, for its ``--help``: flag, accepted shape, words."""
    declared = registry.get(runtime_id).options()
    if not declared:
        return f"the {runtime_id} runtime takes no options\n"
    rows = [[f"--{o.name}", o.shape(), o.description] for o in declared]
    text = table(["OPTION", "ACCEPTS", "DESCRIPTION"], rows)
    return (f"options of {runtime_id} (--<option> V, or as on serve --{runtime_id}-<option> V):\n"
            + "".join(f"  {line}\n" for line in text.splitlines()))


#: a failed check's error code: the runtime is not available, or it is and the model is what fails
NOT_AVAILABLE, MODEL_UNREADABLE, MODEL_NOT_SERVABLE = "not-available", "model-unreadable", "model-not-servable"


def _verdict(report: Any, code: int) -> tuple[bool, str, str]:
    """Whether the check passed, why not, and the error code that says which part failed (the
    runtime: ``not-available``; an available runtime's model: ``model-unreadable`` or
    ``model-not-servable``, so that ``available: true`` never sits beside ``not-available``)."""
    available = report.get("available") if isinstance(report, dict) else None
    if code == 0 and available is True:
        return True, "", ""
    model = report.get("model") if isinstance(report, dict) else None
    if available is True and isinstance(model, dict) and model.get("reads") is not True:
        return False, str(model.get("reads")), MODEL_UNREADABLE
    if available is True and isinstance(model, dict) and model.get("serves", True) is not True:
        return False, str(model.get("serves")), MODEL_NOT_SERVABLE
    return False, str(available) if available is not None else f"its check exited {code}", NOT_AVAILABLE


def _report_ok(report: Any, code: int) -> tuple[bool, str]:
    ok, reason, _ = _verdict(report, code)
    return ok, reason


def run(args: argparse.Namespace) -> int:
    """0 the runtime is available with these options; 1 it is not (named options at fault); 2 usage."""
    model, as_json, pairs = split_args(args.rest, args.id)
    values, forwarded = read_options(args.id, pairs)  # before any worker starts
    if model is not None:  # a FIFO or a device would hold the worker's read forever
        model_path("--model", model, args.id)
    environ: Mapping[str, str] = dict(os.environ)
    head = ["check", *(["--model", model] if model else [])]

    def probe(argv: list[str]) -> tuple[bool, str]:
        report, code, _ = catalog.answer(args.id, [*head, *argv], environ)
        return _report_ok(report, code)

    report, code, _ = catalog.answer(args.id, [*head, *forwarded], environ)
    ok, reason, error = _verdict(report, code)
    if not ok and values:
        culprits = find_culprits(probe, values)
        if culprits is not None:
            reason = culprit_message(args.id, culprits, values, reason)
            if isinstance(report, dict):
                report = {**report, "options_at_fault": culprits.names}
    fixes = report_fixes(report) if error == NOT_AVAILABLE else ()
    if as_json:
        if not ok:
            failure = error_doc(error, reason, 1, fixes=fixes)
            report = {**report, **failure} if isinstance(report, dict) else failure
        print_json(report)
    elif ok:
        version = (report.get("runtime") or {}).get("version") if isinstance(report, dict) else None
        sys.stdout.write(f"{args.id}: available" + (f" ({version})" if version else "") + "\n")
    if not ok:
        sys.stderr.write(f"superfluid: {_with_fixes(reason, report, fixes)}\n")
        return 1
    return 0


def _with_fixes(reason: str, report: Any, fixes: tuple[Fix, ...]) -> str:
    """``reason`` and the fixes the report carries, as an error says them: after its advice (the
    words ``available`` holds past the refusal's own, ``refused``) with "; or ", else after ": "."""
    if not fixes:
        return reason
    refused = report.get("refused") if isinstance(report, dict) else None
    joint = "; or " if isinstance(refused, str) and reason != refused else ": "
    return f"{reason}{joint}{render(fixes)}"
