"""What ``doctor`` finds wrong with this home and host, each problem with what fixes it.

See docs/cli.md, "`superfluid doctor [--json]`".
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superfluid.cache_report import DEFAULT_AGE
from superfluid.installer.cache.holds import held_now
from superfluid.installer.cache.prune import human_bytes, parse_age, scan
from superfluid.installer.home.gc import in_use
from superfluid.installer.home.hints import remove_it
from superfluid.installer.home.installs import Installed, Verdict, default_install, read_pinned
from superfluid.installer.trust.manifest import kept_roots
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel import fixes
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.jsonread import UntrustedJson, read_json
from superfluid.runtime.kernel.layout import cache_dir, current_target, home_fault
from superfluid.runtime.kernel.ordering import backend_family
from superfluid.runtime.kernel.output import counted
from superfluid.runtime.planning import backend_runs_here

__all__ = ["Problem", "GPU_FAMILIES", "CACHE_LIMIT", "TRUST_NOTICE", "install_problems", "current_problem",
           "device_problems", "cache_problem", "trust_problems", "root_expiry", "expiry_problem", "home_problem",
           "exchange_problem"]

# Each problem is found from what the other commands compute, never a second copy of their rule: the one
# verdict of an install (``installs.judge``), ``current``'s target (``layout.current_target``), a prune's
# scan, the planner's rule of a backend (``planning.backend_runs_here``); and it carries their fixes.

#: the backend families whose builds run on a GPU: one installed where no such device is, is a problem
GPU_FAMILIES = ("cuda", "rocm", "vulkan", "metal")
#: bytes a prune would free (``cache prune``'s default age) before doctor calls the cache a problem: a
#: listing's old pages are a few kB each; an archive of a removed install is tens of MB
CACHE_LIMIT = 100 * 10**6
#: how long before a kept TUF root expires doctor says so: a service's answers are refused from then on
TRUST_NOTICE = datetime.timedelta(days=30)
#: the verdicts (``installs.judge``) nothing is served from, or that were made for another host
_PROBLEM_STATES = ("broken", "changed", "not for this host")
_ROOT_MAX = 512000  # bytes of a root file (ngclient's root_max_length)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong (``kind``: a word scripts can match, ``message``: what and why) and what fixes
    it: commands (``fixes``) and, where no command does, ``advice`` (prose)."""

    kind: str
    message: str
    fixes: tuple[Fix, ...] = ()
    advice: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"problem", "message", "fix", "fixes", "advice"}`` (``fix``: the first command, or null)."""
        return {"problem": self.kind, "message": self.message, "fix": None, "fixes": [], "advice": self.advice,
                **fixes.as_json(self.fixes)}

    def text(self) -> str:
        """``<message>: <advice>; or `<command>` <does>``, as an error says what fixes it."""
        remedy = fixes.remedy(self.advice, self.fixes)
        return f"{self.message}: {remedy}" if remedy else self.message


# --- installs and current ---------------------------------------------------------------------------


def install_problems(runtime_id: str, judged: Sequence[tuple[Installed, Verdict]]) -> list[Problem]:
    """Each install whose verdict is broken, changed or not for this host, with the verdict's own
    fixes (``installs.judge``: what every command names for it)."""
    return [Problem("install", f"{runtime_id} {v.words()}", v.fixes, v.advice)
            for _, v in judged if v.state in _PROBLEM_STATES]


def current_problem(runtime_id: str, root: str, judged: Sequence[tuple[Installed, Verdict]]) -> Problem | None:
    """``runtimes/<id>/current`` when it names no install while one reads: dangling, a loop, a link
    out of the runtime's folder, a file, a directory, or missing. The fix points it back at the
    default install with ``runtime use``: the pinned one, pinned again (the user's choice kept), else
    ``--auto`` (nothing pinned to lose). When that install is broken or changed, its repair comes first."""
    name, why = current_target(root)
    if name is not None or not any(i.ok for i, _ in judged):
        return None
    path = os.path.join(root, "current")
    message = f"{runtime_id}'s {why}" if why else f"{runtime_id} has no {path}: no install is served by default"
    chosen = default_install(root)
    verdict = next((v for _, v in judged if v.install == chosen), None)
    if chosen is None or verdict is None or verdict.refused:
        return Problem("current", message, advice=f"repair {chosen or 'an install'} first (above); doctor then "
                                                  "names what points current at it")
    pinned = read_pinned(root) == chosen
    return Problem("current", message, (Fix.superfluid(
        "runtime", "use", runtime_id, chosen if pinned else "--auto",
        does=f"points it at {chosen}" + (", pinned as it was" if pinned else ", the best install")),))


def device_problems(runtime_id: str, judged: Sequence[tuple[Installed, Verdict]], host: Host) -> list[Problem]:
    """Each install of a GPU build (``GPU_FAMILIES``) that no device here runs (``planning.backend_runs_here``,
    the rule every plan is judged by): remove it, and where no other install of the runtime runs here,
    install its cpu build first."""
    found: list[Problem] = []
    runs = [i.name for i, v in judged if i.receipt is not None and v.state not in _PROBLEM_STATES
            and backend_runs_here(i.receipt.backend, host.platform, host) is None]
    for installed, verdict in judged:
        receipt = installed.receipt
        if receipt is None or verdict.state in _PROBLEM_STATES or backend_family(receipt.backend) not in GPU_FAMILIES:
            continue
        why = backend_runs_here(receipt.backend, host.platform, host)
        if why is None:
            continue
        cpu = () if runs else (Fix.superfluid("runtime", "install", runtime_id, "--backend", "cpu",
                                              does="installs its cpu build, which runs here"),)
        found.append(Problem("device", f"{runtime_id} {installed.name} is a {receipt.backend} build no device here "
                                       f"runs: {why}", (*cpu, remove_it(runtime_id, installed.name))))
    return found


# --- the cache ----------------------------------------------------------------------------------------


def cache_problem(home: str) -> Problem | None:
    """The download cache when what ``cache prune`` removes at its default age (nothing needs it, and
    it was last used longer ago) weighs ``CACHE_LIMIT`` or more. Reads; changes nothing."""
    root = cache_dir(home)
    if not os.path.isdir(root) or os.path.islink(root):
        return None
    stale = scan(root, in_use(home), grace=parse_age(DEFAULT_AGE), held=held_now(root)).stale()
    size = sum(i.size for i in stale)
    if size < CACHE_LIMIT:
        return None
    files = sum(1 + len(i.also) for i in stale)
    return Problem("cache", f"the download cache {root} holds {human_bytes(size)} ({counted(files, 'file')}) that "
                            f"nothing needs and nothing used for {DEFAULT_AGE}, over the {human_bytes(CACHE_LIMIT)} "
                            "doctor lets pass",
                   (Fix.superfluid("cache", "prune", does="removes them, and keeps what an install needs"),))


# --- trust roots ----------------------------------------------------------------------------------------


def root_expiry(path: str) -> datetime.datetime | None:
    """When the TUF root at ``path`` expires (its ``signed.expires``), or None when it does not read
    as a root with an expiry (the next question to its service refuses it, naming it)."""
    try:
        doc = read_json(path, max_bytes=_ROOT_MAX)
        stamp = doc["signed"]["expires"]
        return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except (OSError, UntrustedJson, KeyError, TypeError, ValueError):
        return None


def expiry_problem(path: str, expires: datetime.datetime, now: datetime.datetime) -> Problem | None:
    """The root kept at ``path`` when it expires within ``TRUST_NOTICE`` of ``now`` (or has): its
    service's answers are refused from then on, unless its operator signs a newer root (which the
    next question to the service fetches). No command renews a root: the advice says who does."""
    if expires - now > TRUST_NOTICE:
        return None
    stamp = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    left = expires - now
    when = f"expired at {stamp}" if left.total_seconds() <= 0 else \
        f"expires at {stamp}, in {counted(max(left.days, 0), 'day')}"
    return Problem("trust-root", f"the manifest service's TUF root kept at {path} {when}: its answers are refused "
                                 "from then on",
                   advice="ask the service's operator to sign a newer root; the next question to the service fetches "
                          "it")


def trust_problems(home: str, now: datetime.datetime | None = None) -> list[Problem]:
    """Each service's newest kept root (``trust.manifest.kept_roots``) that expires within ``TRUST_NOTICE``."""
    clock = now or datetime.datetime.now(datetime.timezone.utc)
    found = [(path, root_expiry(path)) for path in kept_roots(home)]
    return [p for path, expires in found if expires is not None
            and (p := expiry_problem(path, expires, clock)) is not None]


# --- the home -----------------------------------------------------------------------------------------


def home_problem(home: str) -> Problem | None:
    """The home when nothing can be written under it (``layout.home_fault``: a file, a dangling link,
    read-only, not writable): every install, repair and cache write is refused."""
    fault = home_fault(home)
    return None if fault is None else Problem(
        "home", f"{fault}: nothing can be installed there",
        advice="point SUPERFLUID_HOME at a writable directory (or unset it for ~/.superfluid)")


def exchange_problem(folders: Mapping[str, bool | None]) -> Problem | None:
    """The runtime folders (``folder -> whether an install there is replaced in one atomic exchange``,
    ``renameat2(RENAME_EXCHANGE)``; None: not known) on a filesystem without it: a repair or a
    reinstall there renames the old install aside, then the new one in (a kill between is undone by
    the next command), and a command started between the two finds no install. No command changes a
    filesystem: the advice says where a home does not have this."""
    without = sorted(f for f, atomic in folders.items() if atomic is False)
    if not without:
        return None
    return Problem("filesystem", f"{', '.join(without)} {'is' if len(without) == 1 else 'are'} on a filesystem "
                                 "without an atomic exchange (renameat2 RENAME_EXCHANGE): an install repaired or "
                                 "installed again there is missing for a moment",
                   advice="keep SUPERFLUID_HOME on a local filesystem that has it (ext4, XFS, Btrfs, tmpfs)")
