"""Options a runtime takes on serve, declared with the shape of their value, and their checks."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from superfluid.runtime.kernel.errors import UsageError

__all__ = ["Option", "Kind", "check_value", "check_options", "to_argv", "options_json", "find", "parse_flag_pairs",
           "flag_values", "declared_name", "read_options"]

Kind = Literal["int", "float", "bool", "enum", "list", "path"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(kw_only=True, frozen=True, slots=True)
class Option:
    """One option: its name (``n-gpu-layers``), the shape of its value and a one-line description."""

    name: str
    kind: Kind
    description: str
    default: Any = None
    minimum: float | None = None  # int/float: inclusive bounds
    maximum: float | None = None
    values: tuple[str, ...] = ()  # enum: the accepted values
    item: Literal["int", "float", "str"] = "str"  # list: the type of each comma-separated item

    def shape(self) -> str:
        """The accepted shape in words, for error messages: ``an integer from 0 to 999``."""
        if self.kind == "int" or self.kind == "float":
            noun = "an integer" if self.kind == "int" else "a number"
            lo, hi = self.minimum, self.maximum
            if lo is not None and hi is not None:
                return f"{noun} from {_num(lo)} to {_num(hi)}"
            if lo is not None:
                return f"{noun} of at least {_num(lo)}"
            if hi is not None:
                return f"{noun} of at most {_num(hi)}"
            return noun
        if self.kind == "bool":
            return "true or false"
        if self.kind == "enum":
            return "one of " + ", ".join(self.values)
        if self.kind == "list":
            return f"a comma-separated list of {self.item}s" if self.item != "str" else "a comma-separated list"
        return "a path"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.kind, "description": self.description,
                               "default": self.default}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.kind == "enum":
            out["values"] = list(self.values)
        if self.kind == "list":
            out["items"] = self.item
        return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _bounded(option: Option, value: float, raw: str, flag: str) -> None:
    if (option.minimum is not None and value < option.minimum) or (
        option.maximum is not None and value > option.maximum
    ):
        raise UsageError(f"{flag} {raw!r}: expected {option.shape()}")


def check_value(option: Option, raw: str, *, flag: str | None = None) -> Any:
    """Parse ``raw`` by the option's declaration; the parsed value, or a ``UsageError``.

    Raises:
        UsageError: the value does not have the declared shape; the message names the flag, the
            value and the accepted shape (exit 2, before any worker starts).
    """
    flag = flag or f"--{option.name}"
    bad = UsageError(f"{flag} {raw!r}: expected {option.shape()}")
    if option.kind == "int":
        try:
            number = int(raw, 10)
        except ValueError:
            raise bad from None
        _bounded(option, number, raw, flag)
        return number
    if option.kind == "float":
        try:
            real = float(raw)
        except ValueError:
            raise bad from None
        if not math.isfinite(real):
            raise bad
        _bounded(option, real, raw, flag)
        return real
    if option.kind == "bool":
        low = raw.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise bad
    if option.kind == "enum":
        if raw not in option.values:
            raise bad
        return raw
    if option.kind == "list":
        items = [p.strip() for p in raw.split(",")]
        if not raw.strip() or any(not p for p in items):
            raise bad
        try:
            if option.item == "int":
                return [int(p, 10) for p in items]
            if option.item == "float":
                return [float(p) for p in items]
        except ValueError:
            raise bad from None
        return items
    if not raw or "\0" in raw:
        raise bad
    return raw


def parse_flag_pairs(tokens: Sequence[str], known: Callable[[str], bool] | None = None) -> list[tuple[str, str]]:
    """``["--a", "1", "--b=2"]`` -> ``[("a", "1"), ("b", "2")]``.

    ``known(name)``, when given, says which names are flags of this command line; another is
    refused as an unknown flag before its value is looked for.

    Raises:
        UsageError: a token that is not a flag, an unknown flag, or a flag without its value.
    """
    pairs: list[tuple[str, str]] = []
    rest = list(tokens)
    while rest:
        token = rest.pop(0)
        if not token.startswith("--") or len(token) == 2:
            raise UsageError(f"unexpected argument {token!r} (flags are spelled --<name> <value>)")
        name, eq, value = token[2:].partition("=")
        if known is not None and not known(name):
            raise UsageError(f"unknown flag --{name}")
        if not eq:
            if not rest:
                raise UsageError(f"--{name} needs a value")
            value = rest.pop(0)
        pairs.append((name, value))
    return pairs


def flag_values(tokens: Sequence[str], takes: Sequence[str]) -> dict[str, str]:
    """``{"--name": value}`` of flags among ``takes`` (spelled ``--name``), each given at most once.

    Raises:
        UsageError: an unknown flag (``unknown flag --x``), a flag without its value, a repeated
            flag, or an argument that is not a flag.
    """
    out: dict[str, str] = {}
    for name, value in parse_flag_pairs(tokens, lambda n: f"--{n}" in takes):
        flag = f"--{name}"
        if flag in out:
            raise UsageError(f"{flag} is given twice")
        if not value:
            raise UsageError(f"{flag} needs a value")
        out[flag] = value
    return out


def find(options: Iterable[Option], name: str) -> Option | None:
    return next((o for o in options if o.name == name), None)


def check_options(declared: Sequence[Option], given: Sequence[tuple[str, str]], *,
                  prefix: str = "") -> dict[str, Any]:
    """Check every ``(name, raw value)`` pair against the declarations; ``{name: value}``.

    ``prefix`` is how the flags were spelled (``"llamacpp-"`` on serve), for messages.

    Raises:
        UsageError: an option the runtime does not declare, or a value of the wrong shape.
    """
    out: dict[str, Any] = {}
    for name, raw in given:
        option = find(declared, name)
        if option is None:
            raise _no_such(f"{prefix}{name}", declared)
        out[name] = check_value(option, raw, flag=f"--{prefix}{name}")
    return out


def _no_such(flag: str, declared: Sequence[Option]) -> UsageError:
    known = ", ".join(o.name for o in declared) or "none"
    return UsageError(f"--{flag}: no such option (this runtime takes: {known})")


def declared_name(name: str, declared: Iterable[Option], runtime_id: str) -> str | None:
    """The declared option ``--name`` gives, in either spelling a worker takes: ``--<option>``, or
    serve's ``--<id>-<option>`` (docs/adapters.md, "The worker contract"); None when it is neither."""
    names = {o.name for o in declared}
    if name in names:
        return name
    bare = name.removeprefix(f"{runtime_id}-")
    return bare if bare != name and bare in names else None


def read_options(pairs: Sequence[tuple[str, str]], declared: Sequence[Option], runtime_id: str) -> dict[str, Any]:
    """``(name, raw value)`` pairs of a worker's command line, each an option in either spelling
    (``declared_name``), checked against the declarations; ``{option: value}``.

    Raises:
        UsageError: an option the runtime does not declare, a value of the wrong shape, or one option
            in both spellings (``--<id>-<name> and --<name> name the same option: give one``).
    """
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for name, raw in pairs:
        key = declared_name(name, declared, runtime_id)
        option = find(declared, key) if key is not None else None
        if option is None:
            raise _no_such(name, declared)
        if spelled.setdefault(option.name, name) != name:
            raise UsageError(f"--{runtime_id}-{option.name} and --{option.name} name the same option: give one")
        out[option.name] = check_value(option, raw, flag=f"--{name}")
    return out


def _spell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_spell(v) for v in value)
    return str(value)


def to_argv(values: dict[str, Any], *, prefix: str = "") -> list[str]:
    """Checked values as flags: ``["--n-gpu-layers", "0", ...]``; with ``prefix`` (``"llamacpp-"``)
    in serve's spelling, ``["--llamacpp-n-gpu-layers", "0", ...]``, which every worker takes too."""
    argv: list[str] = []
    for name, value in values.items():
        argv += [f"--{prefix}{name}", _spell(value)]
    return argv


def options_json(declared: Sequence[Option]) -> list[dict[str, Any]]:
    return [o.to_json() for o in declared]
