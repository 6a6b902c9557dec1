"""What an install says, for people: its plans (``--dry-run``), what it does while it runs, what it did,
and its ``--timings``; shared by ``runtime install|update|repair`` and ``install --locked``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from superfluid.installer.events import Event, FellBack, Trying, Unchecked, Warned
from superfluid.runtime import registry
from superfluid.runtime.kernel.redact import redact_url

if TYPE_CHECKING:
    from superfluid.installer.install import Outcome
    from superfluid.installer.phases import Phases
    from superfluid.runtime.planning import Plan

__all__ = ["say", "plan_lines", "outcome_lines", "event_lines", "timing_lines"]

_DIGEST_SOURCE = {
    "pin": "pinned in this superfluid's recipe",
    "flag": "as --sha256 names it",
    "release": "the release's .sha256",
    "api": "the listing's digest",
    "computed": "none known: computed and recorded",
    "absent": "not in this release: this plan is skipped",
}


def say(text: str) -> None:
    """One line for people on stderr, now (``superfluid: <text>``)."""
    sys.stderr.write(f"superfluid: {text}\n")
    sys.stderr.flush()


def _mb(size: int) -> str:
    if not size:
        return ""
    return f", {size / 1e6:.1f} MB" if size >= 100_000 else f", {size / 1e3:.1f} kB"


def _abi(runtime_id: str, abi: int | None) -> str | None:
    """``ABI 2`` or ``unnumbered`` for a runtime whose libraries state ABI numbers; else None."""
    return registry.presentation(runtime_id).abi_words(abi)


def plan_lines(plans: list[Plan], where: str) -> str:
    """The plans of a ``--dry-run`` for people: one paragraph per plan, in the order tried."""
    out = [f"plans for this machine, from {where} (tried in order; nothing was changed):"]
    for i, p in enumerate(plans):
        flag = "" if p.tested else " (UNTESTED with this superfluid)"
        abi = f", {words}" if (words := _abi(p.id, p.abi)) else ""
        out.append(f"{i + 1}. {p.id} {p.install} ({p.chosen_by}{abi}){flag}: {p.why}{_mb(p.size)}")
        if p.refused is not None:  # its recorded needs are not met here: skipped, nothing of it fetched
            out.append(f"   refused here, so skipped: {p.refused}")
        for a in p.assets:
            digest = f"sha256 {a.sha256}" if a.sha256 else "no sha256"
            checked = " + ".join(_DIGEST_SOURCE.get(c, c) for c in a.checked) or _DIGEST_SOURCE.get(
                a.digest_source, a.digest_source)
            out.append(f"   from {redact_url(a.url)}")
            out.append(f"     {digest} ({checked})")
    return "\n".join(out) + "\n"


def outcome_lines(outcome: Outcome, *, installs_before: int, repaired: str | None = None) -> str:
    """What an install did, for people (stdout); for a repair (``repaired``: what it put back, e.g.
    ``put back lib/libbaseRT.so as its receipt records it``) said as a repair, not a new install."""
    r = outcome.receipt
    if r is None:
        return ""
    facts = [r.version]
    if (words := _abi(r.id, r.abi)) is not None:
        facts.append(words)
    if not r.tested:
        facts.append("UNTESTED")
    if repaired is not None:
        lines = [f"{r.id} {r.install} repaired: {repaired} ({', '.join(facts)}, chosen by {r.chosen_by})"]
    else:
        lines = [f"{r.id} {r.install} installed ({', '.join(facts)}, chosen by {r.chosen_by})"
                 + (", replacing the one of that name" if outcome.replaced else "")]
    if outcome.proofs is not None:  # who built it, as its Sigstore bundles proved, or that none did
        lines.append(f"{r.id} {r.install}: {outcome.proofs.describe()}")
    if outcome.current and (outcome.pinned or installs_before > 0 or outcome.current != r.install):
        how = "pinned with runtime use" if outcome.pinned == outcome.current else "the best-ranked"
        lines.append(f"{r.id} serves from {outcome.current} by default ({how})")
    return "".join(f"superfluid: {line}\n" for line in lines)


def event_lines(event: Event) -> list[str]:
    """What an install tells while it runs, for people (stderr)."""
    if isinstance(event, Trying):
        p = event.plan
        lead = "installing" if event.index == 0 else "  then, if it does not run:"
        untested = "" if p.tested else " (UNTESTED with this superfluid)"
        return [f"{lead} {p.id} {p.install}: {p.why}{_mb(p.size)}{untested}",
                *(f"  from the download cache (as fetched before from {redact_url(a.url)}; not asked again)"
                  if a.name in event.cached else f"  from {redact_url(a.url)}" for a in p.assets)]
    if isinstance(event, FellBack):
        p = event.plan
        if event.reason.endswith("not in this release"):
            return [f"{p.id} {p.install}: {event.reason}; falling back to the next"]
        return [f"{p.id} {p.install} does not run here ({event.reason}); falling back to the next"]
    if isinstance(event, Warned):
        return [f"warning: {event.reason}"]
    if isinstance(event, Unchecked):
        return [f"warning: {event.path} has no SHA-256 to check it against: installing a local file unchecked "
                f"(its SHA-256 is {event.sha256})"]
    return [f"another install of {event.plan.id} is running ({event.holder}); waiting for it"]


def timing_lines(phases: Phases) -> str:
    """``--timings`` for people (stderr): one line per phase, its start and length in seconds since
    the process started (``start`` covers the interpreter, the imports and the command line)."""
    return "".join(f"superfluid: timing {name:<9} {start:7.3f} s .. {end:7.3f} s  {end - start:7.3f} s\n"
                   for name, start, end in phases.spans())
