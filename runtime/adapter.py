"""The adapter interface: what every runtime declares, how it plans an install, and how its probe is judged.

See docs/adapters.md, "The interface".
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar

from superfluid.runtime.kernel.errors import BadFile, SuperfluidError
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.schema import validate_once
from superfluid.runtime.planning import Listing, ListingNeeded, NotInstallable, Plan, Request, all_refused
from superfluid.runtime.probe import Probed, judge_probe

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host
    from superfluid.runtime.kernel.options import Option

__all__ = ["Adapter", "ModelFacts", "built_by_of", "compat_part", "load_recipe", "refused_here"]

#: bytes of a recipe read (ours are a few KiB)
_RECIPE_MAX_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What a runtime's check reports of the models it reads, as its adapter declares it."""

    #: the model formats it reads (``formats``): how ``superfluid serve`` picks the runtime for a
    #: model, and the gate of its check's ``--model`` (``kernel.formats.reads``)
    formats: list[dict[str, Any]]
    #: where its tokenizer comes from (``tokenizer``)
    tokenizer: dict[str, Any]
    #: its static capability record (``capabilities``, see ``runtime.contract``), ``{}`` when none
    capabilities: dict[str, Any]


def load_recipe(package: str, schema: str | None = None) -> dict[str, Any]:
    """Read and validate ``recipe.json`` of an adapter package (the trust root), validated
    against ``schemas/<schema>.schema.json`` once per content (fast on every run).

    The face reads every adapter's recipe on every ``superfluid runtimes``, and the schema library
    alone costs more than the rest of the command: ``schema.validate_once`` records a validation that
    passed in a stamp named for the SHA-256 of the recipe's and the schema's bytes (any change to
    either file changes the name, so it is validated again).

    Raises:
        BadFile: the recipe is not JSON or does not match its schema (names the JSON path).
    """
    # plain paths, not importlib.resources: its readers import zipfile, a cost on every run
    where = os.path.join(os.path.dirname(str(import_module(package).__file__)), "recipe.json")
    try:  # a file of the package (a link to it is fine: packagers link files), read within limits
        with open(where, "rb") as f:
            text = f.read(_RECIPE_MAX_BYTES + 1)
        data = loads(text, max_bytes=_RECIPE_MAX_BYTES)
    except (OSError, UntrustedJson) as e:
        raise BadFile(where, f"not a readable JSON recipe ({e})") from e
    if schema is not None:
        validate_once(data, text, schema, where, shipped=True)
    if not isinstance(data, dict):
        raise BadFile(where, "a recipe is a JSON object")
    return data


def _declared(module: str | None, name: str) -> tuple[Any, ...]:
    """The table ``name`` of ``module``, imported now (so that naming an adapter imports none); none
    without a module."""
    if module is None:
        return ()
    return tuple(getattr(import_module(module), name))


def _constant(module: str | None, name: str) -> Mapping[str, Any] | None:
    """The mapping ``name`` of ``module``, imported now, or None (no module, or none declared)."""
    if module is None:
        return None
    found = getattr(import_module(module), name, None)
    return found if isinstance(found, Mapping) else None


class Adapter(ABC):
    """One runtime's declarations, its planner and the judge of its probe. Subclasses set ``id`` and
    ``package`` and implement the two declarations ``compat`` and ``versions``; the rest has defaults
    (docs/adapters.md). How it is shown is its ``Presentation``'s (``presentation_from``)."""

    id: ClassVar[str]
    #: its ``check`` runs in process (basert); otherwise in its worker, so that a crash in the
    #: library kills the worker, not the face (the declarations always answer in process)
    linked: ClassVar[bool] = False
    #: the package holding recipe.json
    package: ClassVar[str]
    #: the recipe's schema name in schemas/ (without .schema.json), or None
    recipe_schema: ClassVar[str | None] = None

    @cached_property
    def recipe(self) -> dict[str, Any]:
        return load_recipe(self.package, self.recipe_schema)

    @abstractmethod
    def compat(self) -> dict[str, Any]:
        """This adapter's part of the compat document."""

    @abstractmethod
    def versions(self, host: Host, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Versions it installs on its own, newest first, planned for ``host`` (recipe alone), judged for
        ``compat_part`` (this runtime's part of a compat document; None: ours)."""

    #: the module whose ``OPTIONS`` are the options it takes on serve (None: none), imported when asked
    options_from: ClassVar[str | None] = None
    #: the module whose ``FORMATS`` are the model formats it reads (None: none), imported when asked,
    #: with its ``TOKENIZER`` and ``CAPABILITIES`` when it declares them (its check reports all three)
    formats_from: ClassVar[str | None] = None
    #: the module whose ``PRESENTATION`` says how the face and the manifest show it
    #: (``runtime.presentation``; None: the defaults), imported when asked (``registry.presentation``)
    presentation_from: ClassVar[str | None] = None

    def options(self) -> list[Option]:
        """The options the runtime takes on serve: ``OPTIONS`` of ``options_from``."""
        return list(_declared(self.options_from, "OPTIONS"))

    def model_facts(self) -> ModelFacts:
        """What its check reports of models (``formats``, ``tokenizer``, ``capabilities``): ``FORMATS``,
        ``TOKENIZER`` and ``CAPABILITIES`` of ``formats_from``, else none, the engine's own tokenizer
        (``{"from": "engine"}``) and no capability record (``{}``)."""
        return ModelFacts(formats=[dict(f) for f in _declared(self.formats_from, "FORMATS")],
                          tokenizer=dict(_constant(self.formats_from, "TOKENIZER") or {"from": "engine"}),
                          capabilities=dict(_constant(self.formats_from, "CAPABILITIES") or {}))

    def check(self, argv: list[str], lookup: Lookup) -> tuple[dict[str, Any], int]:
        """A linked adapter's in-process ``check``: the report and exit code its worker's ``check``
        prints, by ``check_argv`` of the package's ``check`` module — an adapter's standard module,
        found by name as the worker finds it (``runtime.worker.engine_handlers``), so that naming an
        adapter for its declarations loads no bindings.

        Only linked adapters check in process; the others are asked through their worker.

        Raises:
            NotImplementedError: the adapter is not linked.
            UsageError: as its ``check_argv`` (an unknown flag or a bad option value).
        """
        if not self.linked:
            raise NotImplementedError(f"the {self.id} adapter is not linked; ask its worker")
        answer: tuple[dict[str, Any], int] = import_module(f"{self.package}.check").check_argv(argv, lookup)
        return answer

    def nothing_to_load(self, lookup: Lookup, worker: str) -> SuperfluidError | None:
        """Why a plain ``check`` by ``worker`` would find nothing here to load (no library, no
        environment, another platform), from file lookups alone in the environment ``lookup`` (the one
        the worker would get): the refusal it would report, its fixes as values.

        None when there is something, which only ``check`` (in the worker) can judge. The default
        knows of nothing to look up, so the check is always asked.
        """
        return None

    # -- installing (SPEC §2: the installer reaches a runtime only through these) ----------------------

    #: its recipe carries every archive of the builds it plans (llama.cpp's tested builds): its plans from
    #: the recipe alone are every plan a listing could offer, so a refusal of them all is the recipe's
    #: (``refused_here``), given before any listing is asked
    plans_from_recipe: ClassVar[bool] = False
    #: the staged library must state the plan's version (a bundle is the release it says)
    holds_version: ClassVar[bool] = False
    #: a build of another backend than cpu must see a device of its family when probed
    needs_device: ClassVar[bool] = True
    #: keys of the check's report that the receipt records
    receipt_keys: ClassVar[tuple[str, ...]] = ()
    #: the variables its worker reads besides ``SUPERFLUID_*`` (``BASERT_LIB``): an answer kept for
    #: one value is not used for another
    environment: ClassVar[tuple[str, ...]] = ()

    @property
    def repo(self) -> str:
        """``owner/name`` of the GitHub repository the recipe's ``releases`` (or ``api``) URL names.

        Raises:
            NotInstallable: the recipe names no releases repository: this superfluid has no installer
                for the runtime (the words of ``plan_for``'s default, which is asked after the listing).
        """
        for key in ("releases", "api"):
            m = re.search(r"/repos/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/releases", str(self.recipe.get(key) or ""))
            if m is not None:
                return m.group(1)
        raise NotInstallable(f"this superfluid has no installer for the {self.id} runtime: its recipe names no "
                             "releases repository")

    def plan(self, request: Request, host: Host, listing: Listing | None = None) -> list[Plan]:
        """The ordered plans for ``request`` on ``host``, from the recipe and, when given, the
        release listing (without one: the recipe alone, as the worker's ``plan`` answers), for
        what this release drives — or, with ``request.for_``, what that release's compat document
        says it drives (the same rules, another input: ``compat_part``).

        Raises:
            NotInstallable: nothing the request names installs here (the message says why).
            InconsistentRelease, DigestConflict, UsageError: the adapter's rules refuse.
        """
        part = compat_part(self, request)
        plans = self.plan_for(request, host, listing, part)
        if request.from_:  # a file named by hand: no release's workflow is asked of it
            return plans
        built_by = built_by_of(self, part if request.for_ is not None else None)
        made_for = request.for_.to_json() if request.for_ is not None else None

        def stated(p: Plan) -> Plan:
            retry = stated(p.retry) if p.retry is not None else None
            return replace(p, built_by=built_by, retry=retry, made_for=made_for or p.made_for)

        return [stated(p) for p in plans]

    def plan_for(self, request: Request, host: Host, listing: Listing | None,
                 compat_part: Mapping[str, Any]) -> list[Plan]:
        """The adapter's rule: ``plan`` for ``compat_part``, this runtime's part of a compat document.

        Raises:
            NotInstallable: as ``plan``; the default installs nothing.
        """
        raise NotInstallable(f"this superfluid has no installer for the {self.id} runtime")

    def probe_argv(self, lib_dir: str) -> list[str]:
        """The worker line that checks the library extracted into ``lib_dir``."""
        return ["check", "--lib", lib_dir]

    def judge_probe(self, plan: Plan, report: Mapping[str, Any], *, untested: bool) -> Probed:
        """The verdict on a staged install from its check's report (``runtime.probe.judge_probe``).

        Raises:
            ProbeRefused: the staged library is not published.
        """
        return judge_probe(plan, report, untested=untested, holds_version=self.holds_version,
                           needs_device=self.needs_device, keeps=self.receipt_keys)


def compat_part(adapter: Adapter, request: Request) -> Mapping[str, Any]:
    """The adapter's part of the compat document ``request`` plans for: ours (``adapter.compat()``),
    or the ``--for`` release's.

    Raises:
        NotInstallable: the ``--for`` release drives nothing of this runtime.
    """
    if request.for_ is None:
        return adapter.compat()
    part = request.for_.runtimes.get(adapter.id)
    if not isinstance(part, Mapping):
        raise NotInstallable(f"superfluid {request.for_.version} ({request.for_.release}) drives no {adapter.id}: "
                             f"its compat document has no runtimes.{adapter.id}")
    return part


def built_by_of(adapter: Adapter, compat_part: Mapping[str, Any] | None = None) -> dict[str, str | None] | None:
    """Who builds ``adapter``'s assets, as an asset's Sigstore bundle must prove it (docs/install.md,
    "Provenance"): ``built_by`` of ``compat_part`` (a ``--for`` release's part of its compat document),
    else of the recipe, else any workflow of its releases repository (``adapter.repo``). None: none of
    those (a runtime whose recipe names no releases repository): no identity is known to ask for.
    """
    for part in (compat_part, adapter.recipe):
        named = part.get("built_by") if part is not None else None
        if isinstance(named, Mapping) and isinstance(named.get("repository"), str):
            return {"repository": named["repository"], "workflow": named.get("workflow"), "ref": named.get("ref")}
    try:
        return {"repository": adapter.repo, "workflow": None, "ref": None}
    except NotInstallable:
        return None


def refused_here(adapter: Adapter, request: Request, host: Host) -> NotInstallable | None:
    """The refusal of ``request`` on ``host`` that the recipe alone decides, given before any release
    listing is asked (issue 42, item 6): for an adapter whose plans come from its recipe
    (``plans_from_recipe``), the recipe's refusal of the request itself (an untested build without
    ``--untested``, no build of the named backend), or every plan refused here (its recorded needs,
    its GPU code, a named backend's driver: a listing could only offer fewer of them). None: the
    listing decides (another adapter, ``--from``, a build whose archives only its release names)."""
    if not adapter.plans_from_recipe or request.from_:
        return None
    try:
        plans = adapter.plan(request, host)
    except ListingNeeded:
        return None
    except NotInstallable as e:
        return e
    return all_refused(plans)
