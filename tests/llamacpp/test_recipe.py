"""``runtime/llamacpp/recipe``: what an archive's name says, the tested builds and their layouts, and
the recipe held to its schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from superfluid.runtime.llamacpp import layout as L
from superfluid.runtime.llamacpp import recipe as R

# --- recipe --------------------------------------------------------------------------------------

class TestRecipe:
    @pytest.mark.parametrize("name,platform,backend,cudart", [
        ("llama-b11284-bin-ubuntu-cuda-13.4-arm64.tar.gz", "linux-arm64", "cuda-13.4", False),
        ("cudart-llama-b11284-bin-ubuntu-cuda-12.8-x64.tar.gz", "linux-x64", "cuda-12.8", True),
        ("llama-b11284-bin-macos-arm64.tar.gz", "macos-arm64", "metal", False),
        ("llama-b11284-bin-macos-x64.tar.gz", "macos-x64", "cpu", False),
        ("llama-b11284-bin-ubuntu-x64.tar.gz", "linux-x64", "cpu", False),
        ("llama-b11284-bin-ubuntu-openvino-2026.4-x64.tar.gz", "linux-x64", "openvino-2026.4", False),
    ])
    def test_archive_names_say_platform_and_backend(self, name: str, platform: str, backend: str,
                                                    cudart: bool) -> None:
        a = R.parse_name(name)
        assert a is not None and (a.build, a.platform, a.backend, a.cudart) == ("b11284", platform, backend, cudart)

    @pytest.mark.parametrize("name", ["llama-b11284-bin-win-cpu-x64.zip", "llama-b11284-xcframework.zip",
                                      "llama-v1-bin-ubuntu-x64.tar.gz", "llama-b1-bin-ubuntu-s390x.tar.gz"])
    def test_other_names_are_not_archives_we_know(self, name: str) -> None:
        assert R.parse_name(name) is None

    def test_the_tested_builds_and_their_layouts(self) -> None:
        builds = R.tested()
        assert [(b.version, b.layout) for b in builds] == [("b11642", "v2"), ("b11284", "v1")]
        by_name = {x.name: x for x in L.LAYOUTS}
        for b in builds:
            assert b.version in by_name[b.layout].builds
            platforms = {a.platform for a in b.archives if not a.cudart}
            assert {"macos-arm64", "linux-x64", "linux-arm64"} <= platforms
            assert all(a.build == b.version for a in b.archives)
        b11642, b11284 = builds
        assert all(a.sha256 is None for a in b11642.archives)  # none known: absent, never invented
        pinned = {a.name: (a.size, a.sha256) for a in b11284.archives}
        assert len(pinned) == 16 and all(sha for _, sha in pinned.values())
        assert pinned["llama-b11284-bin-ubuntu-x64.tar.gz"] == (
            17438632, "f53f2534e7ac8df1ef056117d215f1581feb6c426310d6423efac9adcdd5c2c8")

    def test_a_recipe_missing_its_tested_list_is_refused_by_the_schema(self) -> None:
        from superfluid.runtime.kernel.errors import BadFile
        from superfluid.runtime.kernel.schema import validate

        data = json.loads((Path(R.__file__).parent / "recipe.json").read_text())
        validate(data, R.SCHEMA, "recipe.json")
        del data["tested"]
        with pytest.raises(BadFile, match="tested"):
            validate(data, R.SCHEMA, "recipe.json")


def test_a_tested_assets_record_is_read_by_key() -> None:
    recipe = {"tested": [{"version": "b2", "assets": [{"name": "a.tar.gz", "needs": {"glibc": "2.34"}}]},
                         {"version": "b1", "assets": [{"name": "a.tar.gz", "kernels": {"cubin": ["sm_86"]}}]}]}
    assert R.tested_record(recipe, "b2", "a.tar.gz", "needs") == {"glibc": "2.34"}
    assert R.tested_record(recipe, "b2", "a.tar.gz", "kernels") is None  # another build's
    assert R.tested_record(recipe, "b1", "a.tar.gz", "kernels") == {"cubin": ["sm_86"]}
    assert R.tested_record(recipe, "b3", "a.tar.gz", "needs") is None
