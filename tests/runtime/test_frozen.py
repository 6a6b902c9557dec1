"""Frozen records: what ``@frozen`` builds is what ``dataclasses.dataclass(frozen=True)`` would, without its
generated code."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, ClassVar

import pytest

from superfluid.runtime.frozen import Field, asdict, field, fields, frozen, is_frozen, replace


@frozen
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", compare=False)
    secret: str = field(default="s", repr=False)
    UNITS: ClassVar[str] = "px"

    def norm(self) -> int:
        return abs(self.x) + abs(self.y)


@frozen(kw_only=True)
class Named:
    name: str
    point: Point
    size: int = 1


@frozen(order=True)
class Version:
    major: int
    minor: int = 0


@frozen
class Checked:
    value: int
    doubled: int = 0

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")
        object.__setattr__(self, "doubled", self.value * 2)


@frozen
class Shy:
    key: bytes

    def __repr__(self) -> str:
        return "Shy(...)"


@dataclasses.dataclass(frozen=True)
class Twin:
    """The standard library's frozen dataclass of Point's fields, the reference for behaviour."""

    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)
    note: str = dataclasses.field(default="", compare=False)
    secret: str = dataclasses.field(default="s", repr=False)


def test_init_takes_fields_by_position_and_keyword_with_defaults() -> None:
    p = Point(1, y=2, note="n")
    assert (p.x, p.y, p.tags, p.note, p.secret) == (1, 2, [], "n", "s")
    assert Point(3).y == 0 and Point.UNITS == "px" and Point(3, 4).norm() == 7


def test_a_default_factory_is_called_for_each_instance() -> None:
    a, b = Point(1), Point(1)
    assert a.tags == [] and a.tags is not b.tags


@pytest.mark.parametrize(("call", "words"), [
    pytest.param(lambda: Point(), "missing required argument: 'x'", id="missing"),
    pytest.param(lambda: Point(1, 2, [], "", "", 9), "takes 5 positional arguments but 6", id="too-many"),
    pytest.param(lambda: Point(1, z=2), "unexpected keyword argument 'z'", id="unknown"),
    pytest.param(lambda: Point(1, x=2), "multiple values for argument 'x'", id="twice"),
    pytest.param(lambda: Named("a", Point(1)), "takes 0 positional arguments but 2", id="kw-only"),
    pytest.param(lambda: Named(point=Point(1)), "missing required argument: 'name'", id="kw-only-missing"),
])
def test_a_wrong_call_is_a_type_error_naming_the_field(call: Any, words: str) -> None:
    with pytest.raises(TypeError, match=words.replace("(", r"\(")):
        call()


def test_fields_cannot_be_assigned_or_deleted() -> None:
    p = Point(1)
    with pytest.raises(AttributeError, match="frozen Point"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen Point"):
        del p.x  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]
    assert p.x == 1


def test_equality_and_hash_see_the_compared_fields_only() -> None:
    assert Point(1, note="a") == Point(1, note="b")
    assert hash(Version(1, 2)) == hash(Version(1, 2)) == hash((1, 2))
    with pytest.raises(TypeError, match="unhashable"):  # a list field, as with dataclasses
        hash(Point(1))
    assert Point(1) != Point(2) and Point(1, 2) != Point(1, 3)
    assert Point(1) != Twin(1)  # another class, even with the same fields
    assert Point(1).__eq__(object()) is NotImplemented
    assert len({Version(1), Version(1), Version(2)}) == 2


def test_repr_is_the_dataclasses_one_and_leaves_out_repr_false() -> None:
    p, t = Point(1, 2, ["a"], note="n"), Twin(1, 2, ["a"], note="n")
    assert repr(p) == repr(t).replace("Twin", "Point") == "Point(x=1, y=2, tags=['a'], note='n')"
    assert repr(Named(name="a", point=Point(1))).startswith("Named(name='a', point=Point(x=1,")


def test_a_method_the_class_defines_is_kept() -> None:
    assert repr(Shy(b"k")) == "Shy(...)" and Shy(b"k") == Shy(b"k")


def test_order_compares_fields_in_declaration_order() -> None:
    assert Version(1, 2) < Version(1, 10) < Version(2) and Version(2) >= Version(1, 99)
    assert sorted([Version(2), Version(1, 5), Version(1)]) == [Version(1), Version(1, 5), Version(2)]
    with pytest.raises(TypeError):
        _ = Version(1) < (1, 0)  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = Point(1) < Point(2)  # type: ignore[operator]  # no order asked


def test_post_init_runs_on_init_and_on_replace() -> None:
    assert Checked(3).doubled == 6
    assert replace(Checked(3), value=5).doubled == 10
    with pytest.raises(ValueError, match="negative"):
        replace(Checked(3), value=-1)


def test_replace_copies_with_changes_and_refuses_an_unknown_field() -> None:
    p = Point(1, 2, ["a"], note="n")
    q = replace(p, y=5)
    assert (q.x, q.y, q.tags, q.note) == (1, 5, ["a"], "n") and p.y == 2
    assert replace(Named(name="a", point=p), size=3).size == 3
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(p, z=1)


def test_asdict_converts_nested_records_and_containers() -> None:
    named = Named(name="a", point=Point(1, tags=["t"]))
    assert asdict(named) == {"name": "a", "size": 1, "point": dataclasses.asdict(Twin(1, tags=["t"]))}
    assert asdict(Point(1, tags=["t"])) == dataclasses.asdict(Twin(1, tags=["t"]))


def test_fields_lists_the_fields_in_order_without_class_variables() -> None:
    assert [f.name for f in fields(Point)] == [f.name for f in dataclasses.fields(Twin)]
    assert [f.name for f in fields(Named(name="a", point=Point(1)))] == ["name", "point", "size"]
    assert all(isinstance(f, Field) for f in fields(Point))
    assert is_frozen(Point) and is_frozen(Point(1)) and not is_frozen(Twin) and not is_frozen(1)
    with pytest.raises(TypeError, match="not a frozen record"):
        fields(Twin)


def test_a_required_field_after_a_default_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match="non-default field 'b' follows a default one"):
        @frozen
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


def test_a_default_and_a_factory_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):
        field(default=1, default_factory=int)


def test_records_pickle_and_copy_as_they_are() -> None:
    p = Point(1, 2, ["a"])
    for twin in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert twin == p and twin.tags == ["a"] and type(twin) is Point


def test_the_package_declares_its_frozen_records_with_frozen_only() -> None:
    """A frozen dataclass costs the command that imports it ~1 ms of generated code (and importing
    ``dataclasses`` ~10 ms): the package's records are ``@frozen``; dataclasses stay for mutable state."""
    import re

    from tests.conftest import ROOT

    pattern = re.compile(r"@(?:dataclasses\.)?dataclass\([^)]*frozen\s*=\s*True")
    found = [p.relative_to(ROOT).as_posix() for top in ("runtime", "installer", "manifest", "superfluid")
             for p in sorted((ROOT / top).rglob("*.py")) if pattern.search(p.read_text(encoding="utf-8"))]
    assert found == []


def test_a_record_extending_another_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match="does not extend another"):
        @frozen
        class More(Version):
            patch: int = 0
