"""The manifest service's paths: one grammar for the server, the static export and the client.

See docs/manifest-service.md, "The API".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, quote

from superfluid.runtime import registry
from superfluid.runtime.presentation import VERSION_PATTERN, Question

__all__ = [
    "asked_by",
    "PLATFORMS",
    "RouteError",
    "Health",
    "Page",
    "ReleaseList",
    "ReleaseOne",
    "Choose",
    "Route",
    "parse_route",
    "version_usable",
    "value_usable",
    "choose_route",
]

#: the platform strings of SPEC §3
PLATFORMS = ("linux-x64", "linux-arm64", "macos-x64", "macos-arm64")

_VERSION = re.compile(VERSION_PATTERN)
_JSON = ".json"


def asked_by(runtime: str) -> tuple[str, ...]:
    """The kinds of value ``runtime`` is asked by (its presentation's questions, its main one first); none
    for a runtime this superfluid does not ship."""
    if runtime not in registry.IDS:
        return ()
    return tuple(q.kind for q in registry.presentation(runtime).questions)


def _question(runtime: str, kind: str) -> Question | None:
    return registry.presentation(runtime).question(kind) if runtime in registry.IDS else None


class RouteError(Exception):
    """A request the service cannot answer: ``status`` (400 or 404 or 405) and the parameter at fault."""

    def __init__(self, status: int, parameter: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.parameter = parameter
        self.message = message


@dataclass(frozen=True, slots=True)
class Health:
    """``/health``: the service itself (never exported)."""

    path = "/health"


@dataclass(frozen=True, slots=True)
class Page:
    """``/`` and ``/index.html``."""

    path = "/index.html"


@dataclass(frozen=True, slots=True)
class ReleaseList:
    """``/v1/releases``."""

    path = "/v1/releases.json"


@dataclass(frozen=True, slots=True)
class ReleaseOne:
    """``/v1/releases/<version>``."""

    version: str

    @property
    def path(self) -> str:
        return f"/v1/releases/{quote(self.version, safe='')}{_JSON}"


@dataclass(frozen=True, slots=True)
class Choose:
    """``/v1/choose/<runtime>/<kind>/<value>[/<platform>]``: which releases drive it."""

    runtime: str
    kind: str
    value: str
    platform: str | None = None

    @property
    def path(self) -> str:
        tail = f"/{self.platform}" if self.platform else ""
        return f"/v1/choose/{self.runtime}/{self.kind}/{quote(self.value, safe='')}{tail}{_JSON}"

    @property
    def asked(self) -> str:
        """What was asked, in words (its question's): ``basert ABI 2``, ``llamacpp build b11642 on linux-x64``."""
        question = _question(self.runtime, self.kind)
        words = question.named(self.value) if question is not None else f"{self.kind} {self.value}"
        return f"{self.runtime} {words}" + (f" on {self.platform}" if self.platform else "")


Route = Health | Page | ReleaseList | ReleaseOne | Choose


def version_usable(version: str) -> bool:
    """Whether a release version can name a path (and an exported file): one segment of letters,
    digits and ``.+_!-``, starting with a letter or digit, at most 64 characters, not ending in
    ``.json``."""
    return bool(_VERSION.fullmatch(version)) and not version.endswith(_JSON)


def value_usable(runtime: str, kind: str, value: str) -> bool:
    """Whether ``value`` is the canonical spelling of a value of ``kind`` asked of ``runtime`` (its
    presentation's question)."""
    question = _question(runtime, kind)
    return question is not None and question.usable(value) and not value.endswith(_JSON)


def choose_route(runtime: str, kind: str, value: str, platform: str | None = None) -> Choose:
    """The ``Choose`` route of a question asked by values (as the command line asks it).

    Raises:
        RouteError: an unknown runtime, a kind it is not asked by, a malformed value or platform.
    """
    kinds = _runtime(runtime)
    if kind not in kinds:
        raise RouteError(400, kind, f"{runtime} is asked by {' or '.join(kinds)}, not by {kind}")
    return Choose(runtime, kind, _value(runtime, kind, value), _platform(platform))


def _query(query: str) -> dict[str, str]:
    try:
        pairs = parse_qs(query, keep_blank_values=True, strict_parsing=False, max_num_fields=16)
    except ValueError:
        raise RouteError(400, "query", "the query string has too many fields") from None
    out = {}
    for key, values in pairs.items():
        if len(values) != 1:
            raise RouteError(400, key, f"{key} is given {len(values)} times; give it once")
        out[key] = values[0]
    return out


def _value(runtime: str, kind: str, value: str) -> str:
    if not value_usable(runtime, kind, value):
        question = _question(runtime, kind)
        words = question.expected if question is not None else kind
        digits = _most_digits(question) if question is not None and question.number else None
        if digits is not None and value.isdigit() and not value.startswith("0") and len(value) > digits:
            raise RouteError(400, kind, f"{kind} {value} is out of range: expected {words}, of at most {digits} "
                                        "digits")
        raise RouteError(400, kind, f"{kind} {value!r} is malformed: expected {words}")
    return value


def _most_digits(question: Question) -> int | None:
    """The most digits a whole number of ``question`` may have (its pattern's bound), or None."""
    fits = [n for n in range(1, 40) if question.usable("9" * n)]
    return max(fits) if fits and len(fits) < 39 else None


def _platform(value: str | None) -> str | None:
    if value is None:
        return None
    if value not in PLATFORMS:
        raise RouteError(400, "platform", f"platform {value!r} is not one of {', '.join(PLATFORMS)}")
    return value


def _runtime(value: str) -> tuple[str, ...]:
    if value not in registry.IDS:
        raise RouteError(404, "runtime", f"no runtime {value!r}: the runtimes are {', '.join(registry.IDS)}")
    return asked_by(value)


def _choose_query(params: dict[str, str]) -> Choose:
    """``/v1/choose?runtime=R&<kind>=V[&platform=P]``."""
    runtime = params.pop("runtime", None)
    if runtime is None:
        raise RouteError(400, "runtime", "runtime is missing: e.g. /v1/choose?runtime=basert&abi=2")
    kinds = _runtime(runtime)
    platform = _platform(params.pop("platform", None))
    given = [k for k in kinds if k in params]
    for key in params:
        if key not in kinds:
            raise RouteError(400, key, f"{key} is not asked of {runtime}: give one of {', '.join(kinds)}")
    if len(given) != 1:
        raise RouteError(400, kinds[0], f"give exactly one of {', '.join(kinds)} for {runtime}")
    return Choose(runtime, given[0], _value(runtime, given[0], params[given[0]]), platform)


def _choose_path(parts: list[str], params: dict[str, str]) -> Choose:
    """``/v1/choose/<runtime>/<kind>/<value>[/<platform>]`` (``parts`` after ``choose``)."""
    if not parts or len(parts) > 4:
        raise RouteError(404, "path", "expected /v1/choose/<runtime>/<kind>/<value>[/<platform>]")
    kinds = _runtime(parts[0])
    if len(parts) < 3:
        raise RouteError(404, "path", f"expected /v1/choose/{parts[0]}/<{'|'.join(kinds)}>/<value>")
    if parts[1] not in kinds:
        raise RouteError(404, "kind", f"{parts[0]} is asked by {' or '.join(kinds)}, not {parts[1]!r}")
    in_path = parts[3] if len(parts) == 4 else None
    in_query = params.pop("platform", None)
    for key in params:
        raise RouteError(400, key, f"unknown query parameter {key!r} (only platform is taken here)")
    if in_path is not None and in_query is not None:
        raise RouteError(400, "platform", "platform is given in the path and in the query; give it once")
    return Choose(parts[0], parts[1], _value(parts[0], parts[1], parts[2]), _platform(in_path or in_query))


def parse_route(path: str, query: str = "") -> Route:
    """The route of a request path (percent-decoded, as WSGI's ``PATH_INFO``) and query string.

    Raises:
        RouteError: an unknown path (404), runtime (404) or kind (404), a malformed value or an
            unknown query parameter (400).
    """
    params = _query(query)
    if path in ("", "/", "/index.html"):
        route: Route = Page()
    elif path in ("/health", "/health.json"):
        route = Health()
    else:
        parts = path.strip("/").split("/")
        parts[-1] = parts[-1].removesuffix(_JSON)
        if parts[:1] != ["v1"] or len(parts) < 2 or parts[1] not in ("releases", "choose"):
            raise RouteError(404, "path", f"no such path {path!r}: see /index.html for the paths answered")
        if parts[1] == "choose":
            return _choose_query(params) if len(parts) == 2 else _choose_path(parts[2:], params)
        if len(parts) == 2:
            route = ReleaseList()
        elif len(parts) == 3 and parts[2]:
            if not version_usable(parts[2]):
                raise RouteError(400, "version", f"version {parts[2]!r} is malformed: expected a version, e.g. 0.3.0")
            route = ReleaseOne(parts[2])
        else:
            raise RouteError(404, "path", f"no such path {path!r}: expected /v1/releases/<version>")
    for key in params:
        raise RouteError(400, key, f"unknown query parameter {key!r}: this path takes none")
    return route
