"""``superfluid-worker-llamacpp`` as a program: version, check (sizing, state identity), flags, exit codes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.receipt import Receipt
from tests import cli
from tests.conftest import ROOT

pytestmark = pytest.mark.native


def worker(*args: str | Path, env: dict[str, str] | None = None, home: Path | None = None
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "superfluid.runtime.llamacpp.worker", *map(str, args)],
                          cwd=ROOT, env=cli.environment(home, **(env or {})), capture_output=True, text=True,
                          timeout=120)


def check(lib: Path, model: Path, *flags: str) -> dict[str, Any]:
    done = worker("check", "--lib", lib, "--model", model, *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1  # one line of JSON
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("flag", ["--lib", "--llamacpp-lib"])
def test_named_is_the_flag_given_found_or_not(libllama_v1: Path, tmp_path: Path, flag: str) -> None:
    found = worker("check", flag, libllama_v1)
    assert found.returncode == 0 and json.loads(found.stdout)["named"] == flag
    missing = worker("check", f"{flag}={tmp_path / 'nope'}")
    report = json.loads(missing.stdout)
    assert missing.returncode == 1 and report["named"] == flag
    assert report["available"].startswith(f"{flag} names {tmp_path / 'nope'}, which does not exist")


def test_check_reports_runtime_layout_devices_and_model(libllama_each: Path, gguf_models: dict[str, Path]) -> None:
    report = check(libllama_each, gguf_models["hd32-always-the.gguf"])
    assert report["runtime"]["id"] == "llamacpp" and report["runtime"]["version"].startswith("llama.cpp ")
    assert report["available"] is True
    assert report["layout"] == libllama_each.name  # the cache dir is named for the layout: v1 | v2
    assert report["formats"][0]["id"] == "gguf"
    assert report["named"] == "--lib"  # the flag as given (issue 15)
    assert any(d["backend"] == "CPU" for d in report["devices"])
    model = report["model"]
    assert model["reads"] is True
    assert model["facts"]["architecture"] == "llama" and model["facts"]["n_vocab"] == 322
    sizing = model["sizing"]
    assert sizing["kv_bytes_per_token"] == 512 and sizing["trained_context"] == 256
    assert sizing["weight_bytes"] == model["facts"]["weight_bytes"] > 0
    # CPU only: host memory within 8 GiB
    assert 0 < sizing["budget_bytes"] <= 8 << 30


def test_cache_type_k_q8_0_changes_the_state_identity_and_unset_does_not(libllama_v1: Path,
                                                                         gguf_models: dict[str, Path]) -> None:
    path = gguf_models["hd32-always-the.gguf"]
    weights = hashlib.sha256(path.read_bytes()).hexdigest()
    plain = check(libllama_v1, path)["model"]
    assert plain["state_identity"] == {"key": weights, "weights": weights, "settings": {}}
    q8 = check(libllama_v1, path, "--cache-type-k", "q8_0")["model"]
    assert q8["state_identity"]["key"] != weights
    assert q8["state_identity"]["settings"] == {"cache-type-k": "q8_0"}
    assert q8["sizing"]["kv_bytes_per_token"] == 2 * (68 + 128)  # K in q8_0 blocks, V still f16
    # options that do not change what a KV cell means leave it alone, and so does f16 named explicitly
    other = check(libllama_v1, path, "--threads", "2", "--cache-type-k", "f16")["model"]
    assert other["state_identity"]["key"] == weights
    rope = check(libllama_v1, path, "--rope-freq-base", "20000")["model"]
    assert rope["state_identity"]["key"] not in (weights, q8["state_identity"]["key"])


def test_a_model_that_is_not_gguf_does_not_read(libllama_v1: Path, tmp_path: Path) -> None:
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"PK\x03\x04 not a model")
    done = worker("check", "--lib", libllama_v1, "--model", bad)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["available"] is True
    assert report["model"]["reads"] == f"{bad} is not a GGUF file (it starts with b'PK\\x03\\x04', not b'GGUF')"


def test_llamas_log_is_silent_unless_asked(libllama_v1: Path, gguf_models: dict[str, Path]) -> None:
    quiet = worker("check", "--lib", libllama_v1, "--model", gguf_models["tiny-f32.gguf"])
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = worker("check", "--lib", libllama_v1, "--model", gguf_models["tiny-f32.gguf"],
                  env={"SUPERFLUID_LLAMA_LOG": "1"})
    assert loud.returncode == 0 and "llama_model_loader" in loud.stderr


def test_an_unknown_flag_or_bad_value_is_a_usage_error(libllama_v1: Path) -> None:
    done = worker("check", "--lib", libllama_v1, "--bogus", "1")
    assert done.returncode == 2 and "unknown flag --bogus" in done.stderr and done.stdout == ""
    done = worker("check", "--lib", libllama_v1, "--cache-type-k", "q9")
    assert done.returncode == 2 and "--cache-type-k 'q9': expected one of f32, f16" in done.stderr
    done = worker("check", "--model")
    assert done.returncode == 2 and "--model needs a value" in done.stderr


def test_nothing_found_is_unavailable_with_the_places_looked(tmp_path: Path) -> None:
    done = worker("check", home=tmp_path)
    assert done.returncode == 1
    why = json.loads(done.stdout)["available"]
    assert why.startswith("llama.cpp not found (looked for libllama.so in ")
    assert str(tmp_path / "runtimes" / "llamacpp" / "current" / "lib") in why
    assert json.loads(done.stdout)["fixes"][0]["argv"] == ["superfluid", "runtime", "install", "llamacpp"]


def _install(home: Path, lib_dir: Path, version: str) -> Path:
    """A store install of ``lib_dir``'s files, with a receipt, as the installer would leave it."""
    install = home / "runtimes" / "llamacpp" / f"{version}-cpu"
    (install / "lib").mkdir(parents=True)
    for f in lib_dir.iterdir():
        if ".so" in f.name:
            (install / "lib" / f.name).symlink_to(f.resolve())
    receipt = Receipt(id="llamacpp", install=install.name, version=version, backend="cpu",
                      worker="bin/superfluid-worker-llamacpp")
    (install / "runtime.json").write_text(json.dumps(receipt.to_json()))
    (home / "runtimes" / "llamacpp" / "current").symlink_to(install.name)
    return install


def test_the_current_install_is_found_and_its_receipt_names_the_version(libllama_v2: Path, tmp_path: Path) -> None:
    _install(tmp_path, libllama_v2, "b11549")
    done = worker("version", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "llama.cpp b11549\n"
    report = json.loads(worker("check", home=tmp_path).stdout)
    assert report["layout"] == "v2" and "named" not in report


def test_the_environment_names_a_directory(libllama_v1: Path, tmp_path: Path) -> None:
    done = worker("check", home=tmp_path, env={"SUPERFLUID_LLAMA_LIB": str(libllama_v1)})
    report = json.loads(done.stdout)
    assert report["named"] == "SUPERFLUID_LLAMA_LIB" and report["layout"] == "v1"
    empty = tmp_path / "empty"
    empty.mkdir()
    done = worker("version", home=tmp_path, env={"SUPERFLUID_LLAMA_LIB": str(empty)})
    assert done.returncode == 1
    assert f"SUPERFLUID_LLAMA_LIB names the directory {empty}, which holds neither libllama.so nor" in done.stderr
