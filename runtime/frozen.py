"""Frozen records declared by their fields, built without ``dataclasses``' generated code (the start path's cost)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, overload

__all__ = ["Field", "frozen", "field", "fields", "replace", "asdict", "is_frozen"]

T = TypeVar("T")
_MISSING: Any = object()
_SPEC = "__frozen_fields__"
_POSITIONAL = "__frozen_positional__"

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[T], T]:
        return lambda f: f


class Field:
    """One field of a frozen record: its name, default (or factory), and whether repr and == see it."""

    __slots__ = ("name", "default", "factory", "repr", "compare", "kw_only")

    def __init__(self, default: Any = _MISSING, factory: Callable[[], Any] | None = None,
                 repr: bool = True, compare: bool = True) -> None:
        if default is not _MISSING and factory is not None:
            raise ValueError("a field has a default or a default_factory, not both")
        self.name = ""
        self.default = default
        self.factory = factory
        self.repr = repr
        self.compare = compare
        self.kw_only = False

    def __repr__(self) -> str:
        return f"Field({self.name!r})"


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None,
          repr: bool = True, compare: bool = True) -> Any:
    """A field with a default, a default factory, or left out of ``repr`` / ``==`` (as ``dataclasses.field``)."""
    return Field(default, default_factory, repr, compare)


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _fields_of(cls: type, kw_only: bool) -> tuple[Field, ...]:
    if any(hasattr(base, _SPEC) for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__qualname__}: a frozen record does not extend another (none does)")
    found: list[Field] = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, Field) else Field(value)
        f.name = name
        f.kw_only = kw_only
        if isinstance(value, Field):  # the class attribute is the default, as dataclasses leaves it
            if f.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        found.append(f)
    positional = [f for f in found if not f.kw_only]
    for before, after in zip(positional, positional[1:], strict=False):
        if _has_default(before) and not _has_default(after):
            raise TypeError(f"{cls.__qualname__}: non-default field {after.name!r} follows a default one")
    return tuple(found)


def _has_default(f: Field) -> bool:
    return f.default is not _MISSING or f.factory is not None


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    if args:
        positional: tuple[Field, ...] = getattr(cls, _POSITIONAL)
        if len(args) > len(positional):
            raise TypeError(f"{cls.__qualname__}() takes {len(positional)} positional arguments "
                            f"but {len(args)} were given")
        for f, value in zip(positional, args, strict=False):
            if f.name in kwargs:
                raise TypeError(f"{cls.__qualname__}() got multiple values for argument {f.name!r}")
            kwargs[f.name] = value
    put = object.__setattr__
    for f in getattr(cls, _SPEC):
        name = f.name
        if name in kwargs:
            put(self, name, kwargs.pop(name))
        elif f.factory is not None:
            put(self, name, f.factory())
        elif f.default is not _MISSING:
            put(self, name, f.default)
        else:
            raise TypeError(f"{cls.__qualname__}() missing required argument: {name!r}")
    if kwargs:
        raise TypeError(f"{cls.__qualname__}() got an unexpected keyword argument {next(iter(kwargs))!r}")
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


def _compared(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, f.name) for f in getattr(type(self), _SPEC) if f.compare)


def _eq(self: Any, other: object) -> object:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _compared(self) == _compared(other)


def _hash(self: Any) -> int:
    return hash(_compared(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in getattr(type(self), _SPEC) if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _setattr(self: Any, name: str, value: object) -> None:
    raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__qualname__}")


def _delattr(self: Any, name: str) -> None:
    raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__qualname__}")


def _order(op: Callable[[tuple[Any, ...], tuple[Any, ...]], bool]) -> Callable[[Any, object], object]:
    def compare(self: Any, other: object) -> object:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return op(_compared(self), _compared(other))
    return compare


_ORDER = {"__lt__": _order(lambda a, b: a < b), "__le__": _order(lambda a, b: a <= b),
          "__gt__": _order(lambda a, b: a > b), "__ge__": _order(lambda a, b: a >= b)}


def _build(cls: type[T], kw_only: bool, order: bool) -> type[T]:
    spec = _fields_of(cls, kw_only)
    setattr(cls, _SPEC, spec)
    setattr(cls, _POSITIONAL, tuple(f for f in spec if not f.kw_only))
    own = cls.__dict__
    methods: dict[str, Any] = {"__init__": _init, "__setattr__": _setattr, "__delattr__": _delattr,
                               "__repr__": _repr, "__eq__": _eq}
    if order:
        methods.update(_ORDER)
    for name, method in methods.items():
        if name not in own:
            setattr(cls, name, method)
    if own.get("__hash__") is None:  # eq set without a hash of its own makes it None: frozen values hash
        cls.__hash__ = _hash  # type: ignore[method-assign]
    return cls


@overload
def frozen(cls: type[T], /) -> type[T]: ...
@overload
def frozen(*, kw_only: bool = False, order: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: type[T] | None = None, /, *, kw_only: bool = False,
           order: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """Make ``cls`` a frozen record of its annotated fields: ``__init__`` (``kw_only``: by keyword only),
    ``repr``, ``==`` and ``hash`` over the compared fields, ``<`` and the rest when ``order``; a method the
    class defines itself is kept."""
    if cls is None:
        return lambda c: _build(c, kw_only, order)
    return _build(cls, kw_only, order)


def is_frozen(obj: object) -> bool:
    """Whether ``obj`` (a class or an instance) is a frozen record."""
    return hasattr(obj if isinstance(obj, type) else type(obj), _SPEC)


def fields(obj: object) -> tuple[Field, ...]:
    """The fields of a frozen record (class or instance), in declaration order."""
    if not is_frozen(obj):
        raise TypeError(f"{obj!r} is not a frozen record")
    spec: tuple[Field, ...] = getattr(obj if isinstance(obj, type) else type(obj), _SPEC)
    return spec


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record ``obj`` with ``changes`` (checked as its ``__init__`` checks them)."""
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    unknown = [k for k in changes if k not in values]
    if unknown:
        raise TypeError(f"{type(obj).__qualname__} has no field {unknown[0]!r}")
    return type(obj)(**{**values, **changes})


def asdict(obj: object) -> dict[str, Any]:
    """The record as a dict, records, lists, tuples and dicts inside it converted in turn (as
    ``dataclasses.asdict``)."""
    return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}


def _plain(value: Any) -> Any:
    if is_frozen(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        items: Iterator[Any] = (_plain(v) for v in value)
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return type(value)((_plain(k), _plain(v)) for k, v in value.items())
    return value
