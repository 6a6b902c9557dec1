"""Runtime options on the command line: checked before any worker starts, forwarded as flags."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.options import check_options, parse_flag_pairs, to_argv

__all__ = ["parse_flag_pairs", "check_runtime_options", "worker_argv", "split_serve_options",
           "Culprits", "find_culprits", "culprit_message"]


def check_runtime_options(runtime_id: str, pairs: Sequence[tuple[str, str]], *, prefix: str = "") -> dict[str, Any]:
    """Check ``(name, raw value)`` pairs against the runtime's declared options; ``{name: value}``.

    The declarations come from the adapter in process (recipe-level data), never from a worker.

    Raises:
        UsageError: an unknown runtime, an option it does not take, or a value of the wrong shape
            (names the flag as spelled, the value and the accepted shape).
    """
    declared = registry.get(runtime_id).options()
    return check_options(declared, pairs, prefix=prefix)


def worker_argv(values: Mapping[str, Any], *, prefix: str = "") -> list[str]:
    """Checked values as the worker reads them: ``["--n-gpu-layers", "0", ...]``; with ``prefix``
    (``"llamacpp-"``) in serve's spelling, which every worker takes too."""
    return to_argv(dict(values), prefix=prefix)


def split_serve_options(pairs: Sequence[tuple[str, str]], ids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """``serve``'s ``--<id>-<name> V`` flags, grouped by runtime id (the longest id that fits wins).

    Raises:
        UsageError: a flag that names no runtime this release ships.
    """
    grouped: dict[str, list[tuple[str, str]]] = {}
    for flag, value in pairs:
        owner = max((i for i in ids if flag.startswith(i + "-") and len(flag) > len(i) + 1), key=len, default=None)
        if owner is None:
            raise UsageError(f"--{flag}: not a serve flag, nor --<runtime>-<option> of a runtime this "
                             f"superfluid ships ({', '.join(ids)})")
        grouped.setdefault(owner, []).append((flag[len(owner) + 1:], value))
    return grouped


#: a probe: worker argv of options -> (passed, reason when not)
Probe = Callable[[list[str]], tuple[bool, str]]


class Culprits(NamedTuple):
    """The options at fault: each fails alone, or (``together``) only their combination fails."""

    names: list[str]
    together: bool


def find_culprits(probe: Probe, values: Mapping[str, Any]) -> Culprits | None:
    """The options at fault when the probe fails with ``values`` and passes without them.

    None when it passes with them, or also fails without them (the options are not the cause);
    otherwise the options that fail alone, or all of them when only their combination fails.
    """
    if not values:
        return None
    passed, _ = probe(worker_argv(values))
    if passed:
        return None
    if not probe([])[0]:
        return None
    alone = [name for name, value in values.items() if not probe(worker_argv({name: value}))[0]]
    return Culprits(alone, False) if alone else Culprits(list(values), True)


def culprit_message(runtime_id: str, culprits: Culprits, values: Mapping[str, Any], reason: str, *,
                    prefix: str = "") -> str:
    """``the llamacpp runtime fails with --cache-type-k q4_1 and passes without it: <reason>``."""
    spelled = [" ".join(to_argv({n: values[n]})).replace("--", f"--{prefix}", 1) for n in culprits.names]
    if culprits.together:
        what = f"{' '.join(spelled)} together and passes without them"
    elif len(spelled) == 1:
        what = f"{spelled[0]} and passes without it"
    else:
        what = f"each of {', '.join(spelled)} and passes without them"
    return f"the {runtime_id} runtime fails with {what}: {reason}"
