"""``runtime/registry``: the adapters this release ships, found by id; a worker's command name and
the variable that names a worker to ask first."""

from __future__ import annotations

import pytest

from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.layout import worker_command


def test_every_id_answers_its_own_adapter() -> None:
    assert registry.IDS[:3] == ("basert", "llamacpp", "mlx")
    for runtime_id in registry.IDS:
        assert registry.get(runtime_id).id == runtime_id


@pytest.mark.parametrize("runtime_id", ["", "BASERT", "llama.cpp", "basert "])
def test_an_unknown_id_names_what_ships(runtime_id: str) -> None:
    with pytest.raises(UsageError) as caught:
        registry.get(runtime_id)
    assert str(caught.value).startswith(f"no runtime {runtime_id!r}; this superfluid ships: {', '.join(registry.IDS)}")


@pytest.mark.parametrize(("runtime_id", "variable", "command"), [
    ("basert", "SUPERFLUID_WORKER_BASERT", "superfluid-worker-basert"),
    ("llamacpp", "SUPERFLUID_WORKER_LLAMACPP", "superfluid-worker-llamacpp"),
    ("my-engine.v2", "SUPERFLUID_WORKER_MY_ENGINE_V2", "superfluid-worker-my-engine.v2"),
])
def test_worker_names(runtime_id: str, variable: str, command: str) -> None:
    assert registry.env_override(runtime_id) == variable
    assert worker_command(runtime_id) == command


@pytest.mark.parametrize(("name", "suggestion"), [
    pytest.param("BASERT", ": did you mean 'basert'?", id="case"),
    pytest.param("Llama.CPP", ": did you mean 'llamacpp'?", id="case-and-signs"),
    pytest.param("base-rt", ": did you mean 'basert'?", id="a-sign"),
    pytest.param("FOO", "", id="no-such-runtime"),
    pytest.param("basert2", "", id="another-name"),
])
def test_meant_suggests_only_a_shipped_id(name: str, suggestion: str) -> None:
    assert registry.meant(name) == suggestion


def test_an_id_that_is_no_runtime_id_gets_the_same_suggestion_from_the_store() -> None:
    from superfluid.installer.home.installs import BadName, check_runtime_id

    for name, suggestion in (("FOO", None), ("BASERT", "basert")):
        with pytest.raises(BadName) as refused:
            check_runtime_id(name)
        assert ("did you mean" in str(refused.value)) is (suggestion is not None)
        assert suggestion is None or f"did you mean {suggestion!r}?" in str(refused.value)


@pytest.mark.parametrize(("program", "rid"), [
    ("/opt/bin/superfluid-worker-llamacpp", "llamacpp"), ("superfluid-worker-basert", "basert"),
    ("/x/superfluid-worker-mlx", "mlx"), ("/x/superfluid-worker-nosuch", None), ("/x/superfluid", None),
    ("/x/superfluid-worker-llamacpp.sh", None), ("", None),
])
def test_a_worker_program_names_its_runtime(program: str, rid: str | None) -> None:
    assert registry.worker_runtime(program) == rid
