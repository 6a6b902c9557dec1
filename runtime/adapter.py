"""The adapter interface: what every runtime declares, and how the face and the manifest show it.

See docs/adapters.md, "The interface".
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.formats import reads
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.schema import validate_once
from superfluid.runtime.planning import Listing, NotInstallable, Plan, Request
from superfluid.runtime.probe import Probed, judge_probe
from superfluid.runtime.registry import aliases_of

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host
    from superfluid.runtime.kernel.options import Option

__all__ = ["Adapter", "load_recipe", "Question", "ServeFlag", "Shown", "VERSION_PATTERN", "by_kind"]

#: bytes of a recipe read (ours are a few KiB)
_RECIPE_MAX_BYTES = 4 << 20
#: a version as a question spells it: one path segment (the manifest's release versions alike)
VERSION_PATTERN = r"[0-9A-Za-z][0-9A-Za-z.+_!-]{0,63}"


@dataclass(frozen=True, slots=True)
class Question:
    """A kind of value the compat manifest is asked about a runtime (``/v1/choose/<id>/<kind>/<value>``,
    ``superfluid compat --service URL --runtime <id> --<kind> V``): its one spelling, and its words."""

    kind: str
    #: the canonical spelling, matched whole: one answer has one path (``2``, never ``02``)
    pattern: str = VERSION_PATTERN
    #: what a malformed value should have been
    expected: str = "a version, e.g. 0.3.0"
    #: the value asked, in words, ``{value}`` filled in (empty: ``<kind> {value}``)
    words: str = ""
    #: the value's name in ``--<kind>``'s usage
    metavar: str = "V"
    #: the value's name in a path of the index page and in a usage error (empty: ``metavar``)
    placeholder: str = ""
    #: what ``--<kind>`` names of this runtime, in its help (``a build, e.g. b11642``)
    flag: str = ""
    #: words after the path on the index page (`` (unnumbered)``)
    note: str = ""
    #: asked as a JSON integer in the answer's ``asked`` (``"abi": 2``)
    number: bool = False

    def usable(self, value: str) -> bool:
        """Whether ``value`` is the canonical spelling of this kind of value."""
        return re.fullmatch(self.pattern, value) is not None

    def named(self, value: str) -> str:
        """The value asked, in words: ``ABI 2``, ``build b11642``."""
        return (self.words or f"{self.kind} {{value}}").format(value=value)

    @property
    def sample(self) -> str:
        return self.placeholder or self.metavar


class ServeFlag(NamedTuple):
    """One of a runtime's options shown among serve's own flags, as ``--<id>-<option> METAVAR``."""

    option: str
    metavar: str
    words: str


class Shown(NamedTuple):
    """A compat part as ``superfluid compat`` prints it: one line, then a table when it has rows."""

    line: str
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


def by_kind(adapters: Iterable[Adapter]) -> dict[str, list[tuple[Adapter, Question]]]:
    """Every kind of question the adapters are asked, in name order, each with the adapters asked it:
    those asked it first (their first question) before the others, each group in the order given."""
    found: dict[str, list[tuple[int, int, Adapter, Question]]] = {}
    for n, adapter in enumerate(adapters):
        for rank, q in enumerate(adapter.questions):
            found.setdefault(q.kind, []).append((rank, n, adapter, q))
    return {kind: [(a, q) for _, _, a, q in sorted(found[kind], key=lambda f: f[:2])] for kind in sorted(found)}


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
    """One runtime's declarations. Subclasses set ``id`` and ``package`` and implement the two
    declarations ``compat`` and ``versions``; the rest has defaults (docs/adapters.md)."""

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

    def options(self) -> list[Option]:
        """The options the runtime takes on serve: ``OPTIONS`` of ``options_from``."""
        return list(_declared(self.options_from, "OPTIONS"))

    def formats(self) -> list[dict[str, Any]]:
        """The model formats the runtime reads, as its ``check`` reports them (``formats``): how
        ``superfluid serve`` picks the runtime for a model (``superfluid.runtime.kernel.formats``):
        ``FORMATS`` of ``formats_from``."""
        return [dict(f) for f in _declared(self.formats_from, "FORMATS")]

    @property
    def aliases(self) -> list[str]:
        """The other names ``--runtime`` takes for it (``registry.ALIASES``; its check's ``runtime.aliases``)."""
        return aliases_of(self.id)

    def tokenizer(self) -> dict[str, Any]:
        """Where its tokenizer comes from, as its check reports it (``tokenizer``): ``TOKENIZER`` of
        ``formats_from``, else the engine's own (``{"from": "engine"}``)."""
        return dict(_constant(self.formats_from, "TOKENIZER") or {"from": "engine"})

    def capabilities(self) -> dict[str, Any]:
        """Its static capability record, as its check reports it (``capabilities``, see
        ``runtime.contract``): ``CAPABILITIES`` of ``formats_from``, else none (``{}``)."""
        return dict(_constant(self.formats_from, "CAPABILITIES") or {})

    def reads(self, path: str) -> str | None:
        """Why it does not read ``path`` by its formats alone (missing, or of another format), or None:
        the gate its check's ``--model`` passes before anything is loaded."""
        return reads(self.formats(), path)

    def check(self, argv: list[str], environ: Mapping[str, str]) -> tuple[dict[str, Any], int]:
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
        answer: tuple[dict[str, Any], int] = import_module(f"{self.package}.check").check_argv(argv, environ)
        return answer

    def nothing_to_load(self, environ: Mapping[str, str], worker: str) -> str | None:
        """Why a plain ``check`` by ``worker`` would find nothing here to load (no library, no
        environment, another platform), from file lookups alone: the reason it would report.

        None when there is something, which only ``check`` (in the worker) can judge. The default
        knows of nothing to look up, so the check is always asked.
        """
        return None

    # -- installing (SPEC §2: the installer reaches a runtime only through these) ----------------------

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
            NotInstallable: the recipe names no releases repository.
        """
        for key in ("releases", "api"):
            m = re.search(r"/repos/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/releases", str(self.recipe.get(key) or ""))
            if m is not None:
                return m.group(1)
        raise NotInstallable(f"the {self.id} recipe names no releases repository")

    def plan(self, request: Request, host: Host, listing: Listing | None = None) -> list[Plan]:
        """The ordered plans for ``request`` on ``host``, from the recipe and, when given, the
        release listing (without one: the recipe alone, as the worker's ``plan`` answers), for
        what this release drives — or, with ``request.for_``, what that release's compat document
        says it drives (the same rules, another input).

        Raises:
            NotInstallable: nothing the request names installs here (the message says why).
            InconsistentRelease, DigestConflict, UsageError: the adapter's rules refuse.
        """
        plans = self.plan_for(request, host, listing, self.compat_part(request))
        if request.for_ is None:
            return plans
        made_for = request.for_.to_json()
        return [replace(p, made_for=made_for) for p in plans]

    def compat_part(self, request: Request) -> Mapping[str, Any]:
        """This runtime's part of the compat document the request plans for: ours (``compat()``),
        or the ``--for`` release's.

        Raises:
            NotInstallable: the ``--for`` release drives nothing of this runtime.
        """
        if request.for_ is None:
            return self.compat()
        part = request.for_.runtimes.get(self.id)
        if not isinstance(part, Mapping):
            raise NotInstallable(f"superfluid {request.for_.version} ({request.for_.release}) drives no {self.id}: "
                                 f"its compat document has no runtimes.{self.id}")
        return part

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

    # -- how the face and the compat manifest show it (docs/adapters.md) ------------------------------

    #: its libraries state an ABI number, or none (unnumbered): its plans, installs and row say which
    numbered_abi: ClassVar[bool] = False
    #: what the compat manifest is asked about it (``/v1/choose/<id>/<kind>/...``), its main one first
    questions: ClassVar[tuple[Question, ...]] = ()
    #: its options shown among serve's own flags (``superfluid serve --help``), with their words there
    serve_flags: ClassVar[tuple[ServeFlag, ...]] = ()
    #: the heading of the index page's column of what each release drives of it (empty: the id)
    column: ClassVar[str] = ""

    def abi_words(self, abi: int | None) -> str | None:
        """``ABI 2`` or ``unnumbered`` when its libraries state ABI numbers (``numbered_abi``); else None."""
        if not self.numbered_abi:
            return None
        return f"ABI {abi}" if abi is not None else "unnumbered"

    def question(self, kind: str) -> Question | None:
        """The question of ``kind`` it is asked, or None."""
        return next((q for q in self.questions if q.kind == kind), None)

    def judge(self, part: Mapping[str, Any], kind: str, value: str, platform: str | None,
              release: str) -> dict[str, Any]:
        """Whether a release (``release``: its name and version) whose compat part for this runtime is
        ``part`` drives the ``kind`` ``value`` (on ``platform``): ``{"by", "short", "why", ...}``, ``by``
        None when it does not (the manifest's ``/v1/choose`` rows).

        Raises:
            NotImplementedError: it declares no questions (the default).
        """
        raise NotImplementedError(f"the {self.id} adapter is asked no questions")

    def named(self, part: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """``(kind, value)`` of every value a release's part names: the answers a static export holds."""
        return iter(())

    def drives_cell(self, part: Mapping[str, Any]) -> str:
        """What a release drives of it, in one short cell (the index page, ``superfluid-manifest check``)."""
        return "yes"

    def shown(self, part: Mapping[str, Any]) -> Shown:
        """Its compat part as ``superfluid compat`` prints it (the options line follows, for all)."""
        return Shown(f"{self.id}:")

    def version_note(self, row: Mapping[str, Any]) -> str:
        """The NOTE of one of its ``versions`` rows in ``superfluid runtime versions``."""
        return ""

    def requires_text(self, requires: Mapping[str, Any]) -> str | None:
        """The line under ``superfluid runtimes`` for the ``requires`` its row states, or None."""
        return None
