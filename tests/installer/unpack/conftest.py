"""Fixtures of the unpacking tests: ``engine``, each inflater in turn."""

from __future__ import annotations

import pytest

from superfluid.installer.unpack import inflate


@pytest.fixture(params=["isal", "zlib"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each inflater in turn: ISA-L as installed, then the standard library's ``zlib``, forced (the
    fallback where the isal wheel is missing)."""
    if request.param == "zlib":
        monkeypatch.setattr(inflate, "isal_zlib", None)
        monkeypatch.setattr(inflate, "igzip_lib", None)
    return str(request.param)
