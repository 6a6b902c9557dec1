"""The install workflow for any adapter: listing → choose → fetch/verify → stage → probe → publish.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from superfluid.installer.cache.stores import Cache
from superfluid.installer.events import FellBack, Tell, Trying, Unchecked, Waiting, Warned
from superfluid.installer.home.fill import fill_for
from superfluid.installer.home.installs import list_installs
from superfluid.installer.home.publish import install_staged
from superfluid.installer.home.steps import PlanSteps
from superfluid.installer.home.upkeep import same_install
from superfluid.installer.phases import phase
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.listing import SourceListing
from superfluid.installer.trust.proving import Proofs, prove
from superfluid.runtime import registry
from superfluid.runtime.adapter import refused_here
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.redact import redact_url
from superfluid.runtime.planning import NotInstallable, Plan, Request, all_refused, is_local
from superfluid.runtime.probe import ProbeRefused

if TYPE_CHECKING:
    from pathlib import Path

    from superfluid.installer.cache.download import Progress
    from superfluid.installer.mutex import MutexOwner
    from superfluid.installer.phases import Phases
    from superfluid.installer.settings import Settings
    from superfluid.installer.sources.release_source import ReleaseSource
    from superfluid.runtime.hostfacts.host import Host
    from superfluid.runtime.kernel.receipt import Receipt

__all__ = ["Outcome", "Reporter", "install", "install_plans", "plan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reporter:
    """Who hears of an install while it runs: ``tell`` each event (``installer.events``), ``progress``
    the bytes of each download, ``phases`` the timings of its phases (``--timings``); None: no one."""

    tell: Tell | None = None
    progress: Progress | None = None
    phases: Phases | None = None

@dataclass(kw_only=True, frozen=True, slots=True)
class Outcome:
    """The answer of ``install``: the plans, and what was installed unless it was a dry run."""

    id: str
    plans: tuple[Plan, ...]
    dry_run: bool
    source: str
    receipt: Receipt | None = None
    path: str | None = None
    replaced: bool = False
    current: str | None = None
    pinned: str | None = None
    fallbacks: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    cleaned: tuple[str, ...] = field(default=())
    #: the install was already here from the same archives: nothing was fetched or changed
    kept: bool = False
    #: what the installed plan's Sigstore bundles proved (None: a dry run, or kept)
    proofs: Proofs | None = None

    def to_json(self) -> dict[str, Any]:
        """``--json``: the plans for ``--dry-run`` (schema ``plan``), else the install result
        (schema ``install-result``)."""
        out: dict[str, Any] = {"id": self.id, "dry_run": self.dry_run, "source": self.source,
                               "plans": [p.to_json() for p in self.plans]}
        if not self.dry_run:
            out.update(installed=self.receipt.install if self.receipt else None,
                       receipt=self.receipt.to_json() if self.receipt else None, path=self.path,
                       replaced=self.replaced, current=self.current, pinned=self.pinned,
                       fallbacks=[{"install": i, "why": w} for i, w in self.fallbacks])
        out["warnings"] = list(self.warnings)
        if self.kept:
            out["already_installed"] = True
        return out


def plan(request: Request, settings: Settings, *, host: Host | None = None,
         source: ReleaseSource | None = None) -> tuple[list[Plan], str, ReleaseSource | None]:
    """Listing → choose: the ordered plans with every digest settled, a description of where they
    come from, and the source (None for ``--from``, which reads no listing): ``source``, else the
    one ``source_for`` chooses by ``settings``; ``host``: the machine planned for (default this one,
    ``detect(settings.host_environ)``).

    Raises:
        UsageError: an unknown runtime, a bad ``--mirror``.
        NotInstallable, InconsistentRelease, DigestConflict: the adapter's refusals.
        DownloadError, RateLimited, OfflineMissing, ReleaseNotFound, BadFile: reading the listing.
    """

    adapter = registry.get(request.id)
    host = host or detect(settings.host_environ)
    if request.from_:
        return adapter.plan(request, host), redact_url(request.from_), None

    refused = refused_here(adapter, request, host)
    if refused is not None:  # the recipe alone decides: said before any listing is asked (issue 42, item 6)
        raise refused
    if source is None:
        source = source_for(settings, fix=_fill_fix(request))
    try:
        listing = SourceListing(source, adapter.repo)
        plans = [listing.settle(p, request.sha256) for p in adapter.plan(request, host, listing)]
    except BaseException:
        source.close()
        raise
    return plans, source.describe(), source


def _fill_fix(request: Request) -> Fix:
    """What fills the cache when ``--offline`` finds it lacking: the same install, online (what it names kept)."""
    named = [w for flag, value in (("--version", request.version), ("--backend", request.backend)) if value
             for w in (flag, value)]
    return Fix.superfluid("runtime", "install", request.id, *named, *(["--untested"] if request.untested else []),
                          does="fills the cache and installs it")


def install(request: Request, settings: Settings, reporter: Reporter | None = None, *, dry_run: bool = False,
            host: Host | None = None, source: ReleaseSource | None = None,
            kept: Callable[[Sequence[Plan]], Outcome | None] | None = None) -> Outcome:
    """``superfluid runtime install``: plan, and unless ``dry_run``, fetch, verify, stage, probe and
    publish the first plan that runs here (``install_plans``), telling ``reporter`` as it goes (the
    phases' spans go on its ``phases``). ``settings``, ``host`` and ``source`` as ``plan``'s.
    ``kept`` is asked first with the plans: an outcome it answers (the install is already there) is
    returned as ``kept``, and nothing is fetched.

    Raises:
        UsageError: as ``plan``.
        NotInstallable: the rules refuse, or every plan's probe refused (names each reason).
        ProbeRefused: the only plan's probe refused.
        InconsistentRelease, DigestConflict, VerificationError: the digests (nothing installed).
        DownloadError, OfflineMissing, ReleaseNotFound, BadFile: reading the source.
        UnsafeArchive, StoreError, MutexBusy: extraction and the store (nothing installed).
    """

    reporter = reporter or Reporter()
    tell = reporter.tell or (lambda _event: None)
    host = host or detect(settings.host_environ)
    with phase(reporter.phases, "listing"):
        try:
            plans, where, src = plan(request, settings, host=host, source=source)
        except NotInstallable as e:  # a dry run refused by the recipe alone: its --json shows the plans
            if dry_run and e.plans:
                e.document = Outcome(id=request.id, plans=e.plans, dry_run=True, source="this superfluid's recipe",
                                     ).to_json()
            raise
    try:
        listed = tuple(src.warnings) if src is not None else ()
        for warning in listed:  # a malformed release entry was skipped: said, never silent
            tell(Warned(reason=warning))
        if dry_run:
            planned = Outcome(id=request.id, plans=tuple(plans), dry_run=True, source=where, warnings=listed)
            refused = all_refused(plans)
            if refused is not None:  # a dry run ends as the install would: nothing installs here (issue 42, item 7)
                refused.document = planned.to_json()  # its --json shows the plans, around the error
                raise refused
            return planned
        if kept is not None and (same := kept(plans)) is not None:  # already installed: nothing fetched
            return replace(same, source=where, kept=True, warnings=listed + same.warnings)
        done = install_plans(request.id, plans, settings, reporter, source=src, where=where,
                             untested=request.untested, platform=host.platform,
                             mirror=src.mirror if src is not None else None, keep_same=kept is not None)
        return replace(done, warnings=listed + done.warnings)
    finally:
        if src is not None:
            src.close()


def install_plans(runtime_id: str, plans: Sequence[Plan], settings: Settings, reporter: Reporter | None = None, *,
                  where: str, source: ReleaseSource | None = None, untested: bool = False,
                  platform: str | None = None, lock: Mapping[str, str] | None = None,
                  mirror: str | None = None, keep_same: bool = False) -> Outcome:
    """Fetch, verify, stage, probe and publish the first of ``plans`` (digests settled) that runs
    here; the others are its fallbacks. A plan whose GPU module misses its CUDA runtime is followed
    by its ``retry`` (the same build with its CUDA runtime archive). ``source`` (None: each URL as
    given, through the home's cache) only fetches. ``lock`` (``{"file", "sha256"}``) names the lock
    the plans came from, and ``mirror`` the root of the mirror they are fetched from (a source's
    ``mirror``, or ``--mirror`` of a lock): the receipt records both. ``reporter`` as ``install``'s.
    ``keep_same``: a plan whose install another process made from the same archives while this one
    waited for the lock is not made again (``upkeep.same_install``): the outcome is ``kept``.

    Raises:
        NotInstallable: every plan's probe refused (names each reason), or there is none.
        ProbeRefused: the only plan's probe refused.
        VerificationError, DownloadError, OfflineMissing, UsageError: fetching (nothing installed).
        ProvenanceRefused, ProvenanceRequired: an asset's bundle does not prove it, or it has none where
            provenance is required (``trust.proving.prove``: before it is fetched; nothing installed).
        UnsafeArchive, StoreError, MutexBusy: extraction and the store (nothing installed).
    """

    reporter = reporter or Reporter()
    tell, progress, phases = reporter.tell or (lambda _event: None), reporter.progress, reporter.phases
    platform = platform or detect(settings.host_environ).platform
    adapter = registry.get(runtime_id)
    fallbacks: list[tuple[str, str]] = []
    warnings: list[str] = []

    def unchecked(p: Plan, path: str, sha256: str) -> None:
        warnings.append(f"{path} has no SHA-256 to check it against: installing a local file "
                        f"unchecked (its SHA-256 is {sha256})")
        tell(Unchecked(plan=p, path=path, sha256=sha256))

    refused = all_refused(plans)
    if refused is not None:  # every plan is skipped before any download: said as its dry run says it
        raise refused
    plans = list(plans)  # a plan's retry joins them, next, when its probe asks for it
    for i, p in enumerate(plans):
        absent = [a.name for a in p.assets if a.digest_source == "absent"]
        if absent:  # the release does not publish this plan's archive: the next plan is tried
            reason = f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not in this release"
            _fall_back(plans, i, reason, fallbacks, tell, "installs", NotInstallable(f"{p.id} {p.install}: {reason}"))
            continue
        if p.refused is not None:  # its recorded needs are not met here: refused before any byte is fetched
            refused = NotInstallable(f"{p.id} {p.install}: {p.refused}")
            _fall_back(plans, i, p.refused, fallbacks, tell, "installs", refused)
            continue
        tell(Trying(plan=p, index=i, cached=_cached(p, source, settings.home)))
        proofs = prove(p, source, settings)  # a bundle that does not prove its asset: refused, nothing fetched
        fill = fill_for(p, source, settings=settings, progress=progress, phases=phases, unchecked=partial(unchecked, p))
        steps = PlanSteps(adapter, p, fill, settings=settings, untested=untested, platform=platform, lock=lock,
                          mirror=mirror, phases=phases, kept=proofs.kept(), provenance=proofs.to_json())
        try:
            published = install_staged(settings.home, p.id, p.install, steps.stage, steps.probe,
                                       on_wait=partial(_waiting, tell, p), command=f"superfluid runtime install {p.id}",
                                       kept=partial(_same_there, p) if keep_same else None)
        except ProbeRefused as e:
            if e.missing_runtime is not None and p.retry is not None:  # the same build with its CUDA runtime next
                plans.insert(i + 1, p.retry)
            _fall_back(plans, i, e.reason, fallbacks, tell, "runs", e)
            continue
        if phases is not None and steps.probed:
            phases.add("publish", steps.probed, time.monotonic())
        return Outcome(id=runtime_id, plans=tuple(plans), dry_run=False, source=where, receipt=published.receipt,
                       path=str(published.path),
                       replaced=published.replaced, current=published.current, pinned=published.pinned,
                       fallbacks=tuple(fallbacks),
                       warnings=tuple(warnings), cleaned=published.cleaned, kept=published.kept, proofs=proofs)
    raise NotInstallable(f"nothing of {runtime_id} to install here")


def _same_there(p: Plan, root: Path) -> Receipt | None:
    """The receipt of ``p``'s install when it is in ``root`` already, from the same archives."""
    return same_install(p, list_installs(root))


def _cached(p: Plan, source: ReleaseSource | None, home: str) -> tuple[str, ...]:
    """The names of ``p``'s remote assets whose digest the download cache holds: the install takes
    them from there (verified again), and their URL is never asked."""
    cache = source.cache if source is not None else Cache.for_home(home)
    return tuple(a.name for a in p.assets
                 if a.sha256 is not None and not is_local(a.url) and cache.blobs.blob_path(a.sha256).exists())


def _fall_back(plans: Sequence[Plan], i: int, reason: str, fallbacks: list[tuple[str, str]], tell: Tell,
               verb: str, alone: Exception) -> None:
    """Record that ``plans[i]`` does not install (``reason``) and tell it when another plan follows.

    Raises:
        ``alone`` when it was the only plan, else NotInstallable naming every plan's reason.
    """
    p = plans[i]
    fallbacks.append((p.install, reason))
    if i + 1 < len(plans):
        tell(FellBack(plan=p, index=i, reason=reason))
        return
    if len(plans) == 1:
        raise alone
    raise NotInstallable(f"no {p.id} build {verb} here: " + "; ".join(f"{n}: {w}" for n, w in fallbacks)) from None


def _waiting(tell: Tell, p: Plan, holder: MutexOwner) -> None:
    tell(Waiting(plan=p, holder=holder.describe()))
