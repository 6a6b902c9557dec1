"""libbaseRT found by the shared search and judged: end to end from the home's current install.

The search's rules (flag > BASERT_LIB > beside the executable > ../lib > the current install) are
tested once for every adapter in tests/runtime/hostfacts/test_locate.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from basert_helpers import LIB_NAME, lib_path

from superfluid.runtime.basert import locate
from superfluid.runtime.basert.loader import open_library
from superfluid.runtime.kernel.errors import LibraryNotFound
from superfluid.runtime.kernel.lookup import read


def test_open_library_from_the_current_install(engines: Path, tmp_path: Path) -> None:
    """The search reaches the home's current install, and the verdict runs on it."""
    home = tmp_path / "home"
    lib_dir = home / "runtimes" / "basert" / "0.3.1-cpu" / "lib"
    lib_dir.mkdir(parents=True)
    shutil.copy(lib_path(engines, "0.3.1"), lib_dir / LIB_NAME)
    os.symlink("0.3.1-cpu", home / "runtimes" / "basert" / "current")
    exe = tmp_path / "bin" / "tool"
    exe.parent.mkdir()
    exe.write_bytes(b"")
    lib = open_library(None, read({"SUPERFLUID_HOME": str(home)}), executable=str(exe))
    assert (lib.version, lib.abi, lib.named) == ("0.3.1", 1, None)
    assert lib.path == str(home / "runtimes" / "basert" / "current" / "lib" / LIB_NAME)


# --- libbaseRT's own words (moved from tests/runtime/hostfacts/test_locate.py) ----------------------------------

@pytest.mark.parametrize(("platform", "want"), [
    pytest.param("linux", ("libbaseRT.so", "libbaseRT.so.0"), id="linux"),
    pytest.param("darwin", ("libbaseRT.dylib", "libbaseRT.0.dylib"), id="macos"),
])
def test_library_names(platform: str, want: tuple[str, str]) -> None:
    assert locate.library_names(platform) == want


def test_not_found_in_its_words(tmp_path: Path) -> None:
    with pytest.raises(LibraryNotFound) as caught:
        locate.locate(None, read({"SUPERFLUID_HOME": str(tmp_path)}), executable="/x/bin/worker", platform="linux")
    assert caught.value.message.startswith("libbaseRT not found (looked in /x/bin, ")
