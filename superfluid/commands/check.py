"""``superfluid runtime check <id> [--model PATH] [--json] [--<option> <value>]...`` (SPEC §6.5, §7).

Asks the runtime's ``check`` with options: each value is checked against the runtime's declared
options before any worker starts (a wrong one exits 2, naming the option, the value and the
accepted shape), then forwarded as ``--<name> <value>``. When the check fails with options and
passes without them, the options at fault are named.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid import catalog
from superfluid.optionflags import check_runtime_options, culprit_message, find_culprits, parse_flag_pairs, worker_argv
from superfluid.output import print_json

__all__ = ["run", "split_args"]


def split_args(tokens: Sequence[str]) -> tuple[str | None, bool, list[tuple[str, str]]]:
    """``--model``, ``--json`` and the option pairs of the command line.

    Raises:
        UsageError: a stray argument or a flag without its value.
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
                from superfluid.runtime.errors import UsageError

                if not tokens:
                    raise UsageError("--model needs a path")
                value = tokens.pop(0)
            model = value
        else:
            rest.append(token)
    return model, as_json, parse_flag_pairs(rest)


def _report_ok(report: Any, code: int) -> tuple[bool, str]:
    available = report.get("available") if isinstance(report, dict) else None
    if code == 0 and available is True:
        return True, ""
    model = report.get("model") if isinstance(report, dict) else None
    if available is True and isinstance(model, dict) and model.get("reads") is not True:
        return False, str(model.get("reads"))
    return False, str(available) if available is not None else f"its check exited {code}"


def run(args: argparse.Namespace) -> int:
    """0 the runtime is available with these options; 1 it is not (named options at fault); 2 usage."""
    model, as_json, pairs = split_args(args.rest)
    values = check_runtime_options(args.id, pairs)  # before any worker starts
    environ: Mapping[str, str] = dict(os.environ)
    head = ["check", *(["--model", model] if model else [])]

    def probe(argv: list[str]) -> tuple[bool, str]:
        report, code, _ = catalog.answer(args.id, [*head, *argv], environ)
        return _report_ok(report, code)

    report, code, _ = catalog.answer(args.id, [*head, *worker_argv(values)], environ)
    ok, reason = _report_ok(report, code)
    if not ok and values:
        culprits = find_culprits(probe, values)
        if culprits is not None:
            reason = culprit_message(args.id, culprits, values, reason)
            if isinstance(report, dict):
                report = {**report, "options_at_fault": culprits.names}
    if as_json:
        print_json(report)
    elif ok:
        version = (report.get("runtime") or {}).get("version") if isinstance(report, dict) else None
        sys.stdout.write(f"{args.id}: available" + (f" ({version})" if version else "") + "\n")
    if not ok:
        sys.stderr.write(f"superfluid: {reason}\n")
        return 1
    return 0
