"""``runtime/mlx/worker``: the ``check`` report and the worker's lines — each environment a real directory
whose ``bin/python`` is a script that answers the MLX probe as a real one would (``tests/mlx/environments``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.mlx.worker import check_report, main, parse_check_args
from tests.mlx.environments import GOOD, MAC, venv


def test_check_args() -> None:
    assert parse_check_args(["--model", "/m", "--prefill-chunk", "256"]) == ("/m", {"prefill-chunk": 256})
    with pytest.raises(UsageError, match=r"^unknown flag --threads$"):  # as every worker says it (issue 33)
        parse_check_args(["--threads", "2"])


@pytest.mark.parametrize(("answer", "code", "stderr", "available"), [
    pytest.param(json.dumps(GOOD), 0, "", True, id="ready"),
    pytest.param(json.dumps({**GOOD, "python": "3.11"}), 0, "", "runs Python 3.11, and the MLX runtime installs "
                 "Python 3.12: repairing the mlx runtime reinstalls it", id="another-python"),
    pytest.param(json.dumps({**GOOD, "metal": False}), 0, "", "finds no Metal device", id="no-metal"),
    pytest.param(None, 1, "ModuleNotFoundError: No module named 'mlx'\n",
                 "cannot import mlx and mlx-lm (ModuleNotFoundError: No module named 'mlx')", id="no-mlx"),
    pytest.param(None, 3, "", "cannot import mlx and mlx-lm (exit 3)", id="silent-failure"),
    pytest.param("not json", 0, "", "answered the MLX probe with something other than JSON", id="not-json"),
    pytest.param("[1]", 0, "", "answered the MLX probe with [1]", id="not-an-object"),
])
def test_the_check_report(tmp_path: Path, answer: str | None, code: int, stderr: str,
                          available: bool | str) -> None:
    env = venv(tmp_path / "env", answer, code=code, stderr=stderr)
    report, exit_code = check_report(["--venv", str(env)], read(MAC))
    assert report["platforms"] == ["macos-arm64"] and report["formats"][0]["id"] == "mlx"
    if available is True:
        assert exit_code == 0 and report["available"] is True
        assert report["runtime"]["version"] == "mlx 0.29.3 mlx-lm 0.28.2"
        assert report["devices"] == [{"backend": "Metal", "name": "Apple M3", "memory": 1 << 34}]
    else:
        assert exit_code == 1 and isinstance(report["available"], str) and available in report["available"]
        assert report["runtime"]["version"] is None and report["devices"] == []


@pytest.mark.parametrize(("make", "reads"), [
    pytest.param(lambda p: (p.mkdir(), (p / "config.json").write_text("{}"), (p / "w.safetensors").write_text("")),
                 True, id="a-model"),
    pytest.param(lambda p: p.write_text("x"), "is not a directory; an MLX model is a directory", id="a-file"),
    pytest.param(lambda p: (p.mkdir(), (p / "w.safetensors").write_text("")), "holds no config.json", id="no-config"),
    pytest.param(lambda p: (p.mkdir(), (p / "config.json").write_text("{}")), "holds no .safetensors weights",
                 id="no-weights"),
])
def test_the_model_part(tmp_path: Path, make: Any, reads: bool | str) -> None:
    env = venv(tmp_path / "env", json.dumps(GOOD))
    model = tmp_path / "model"
    make(model)
    report, code = check_report(["--venv", str(env), "--model", str(model)], read(MAC))
    got = report["model"]["reads"]
    assert (got is True) if reads is True else (isinstance(got, str) and reads in got)
    assert code == (0 if reads is True else 1)


def test_version_and_check_as_the_worker_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    env = venv(tmp_path / "env", json.dumps(GOOD))
    for k, v in MAC.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("SUPERFLUID_MLX_VENV", raising=False)
    monkeypatch.setenv("VIRTUAL_ENV", str(env))
    assert main(["version"]) == 0 and capsys.readouterr().out == "mlx 0.29.3 mlx-lm 0.28.2\n"
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out)["available"] is True
    monkeypatch.setenv("SUPERFLUID_HOST_OS", "linux")
    assert main(["version"]) == 1
    assert capsys.readouterr().err == ("superfluid-worker-mlx: MLX runs on Apple silicon only (macos-arm64); this is "
                                       f"Linux {os.environ['SUPERFLUID_HOST_ARCH']}\n")
