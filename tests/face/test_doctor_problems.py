"""``superfluid doctor`` as complete as ``brew doctor`` (issue 44, item 6), through the real CLI on real
homes: superfluid's own paths and what set them, the Python it runs on, each runtime's installs with
their verdicts and the one ``current`` names; last, each problem with its fix, and exit 1 when there is
one (``--json`` the same, under ``problems``). Each problem is made for real (a file of an install
removed or changed, ``current`` pointed out of the home, a GPU build installed where no device runs
it, an old archive in the cache, a kept TUF root that expires in 10 days, a home that is a file, a
filesystem whose ``renameat2`` has no exchange), and each fix is pasted and does what it says."""

from __future__ import annotations

import datetime
import gzip
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from superfluid.doctor_problems import TRUST_NOTICE, expiry_problem
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.cli import Run
from tests.end_to_end.releases import libllama_archive
from tests.end_to_end.test_cudart_retry import CUDART, _tar_gz, gpu_module  # noqa: F401 - the fixture
from tests.end_to_end.test_cudart_retry import MAIN as CUDA_MAIN
from tests.end_to_end.test_one_verdict import _in_place  # a byte of 0.4.0-cpu changed where it is
from tests.faults.conftest import Home, installed_home, mirror_dir, template  # noqa: F401 - the fixtures
from tests.release_server import ReleaseServer
from tests.runtime.fake_roots import lay_out


@pytest.fixture
def doctor_home(installed_home: Home) -> Home:  # noqa: F811 - the fixture
    """A home with basert 0.3.1-cpu and 0.4.0-cpu installed (current: 0.4.0-cpu), and its mirror."""
    return installed_home


@pytest.fixture
def cuda_build(gpu_module: tuple[Path, Path]) -> tuple[Path, Path]:  # noqa: F811 - the fixture
    """(a lib folder: the v2 libllama with a CUDA backend module, the folder of its stub libcudart)."""
    return gpu_module


def _doctor(env: dict[str, str], code: int | None = None) -> tuple[dict[str, Any], Run]:
    """``doctor --json`` (valid against its schema) and ``doctor``, each exiting ``code`` (1 when the
    JSON lists a problem, else 0, when not given)."""
    doc = cli.run("superfluid", "doctor", "--json", env=env)
    text = cli.run("superfluid", "doctor", env=env)
    assert "Traceback" not in doc.stderr + text.stderr, doc.stderr + text.stderr
    answer = doc.json()
    assert schema_errors(answer, "doctor") == [], doc.stdout
    expect = (1 if answer["problems"] else 0) if code is None else code
    assert (doc.code, text.code) == (expect, expect), doc.stderr + text.stderr
    return answer, text


def _problems(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in doc["problems"] if p["problem"] == kind]


def _said(text: Run) -> list[str]:
    """The lines under ``problems:`` of doctor's text."""
    lines = text.stdout.splitlines()
    return lines[lines.index("problems:") + 1:] if "problems:" in lines else []


# --- a good home ------------------------------------------------------------------------------------------


def test_a_good_home_says_its_paths_installs_and_no_problem(doctor_home: Home) -> None:
    doc, text = _doctor(doctor_home.env, 0)
    assert doc["problems"] == [] and text.stdout.endswith("\nno problems found\n")
    home = str(doctor_home.path)
    assert doc["paths"]["home"] == {"path": home, "exists": True, "set_by": "SUPERFLUID_HOME"}
    assert doc["paths"]["cache"] == {"path": f"{home}/cache", "exists": True, "set_by": "SUPERFLUID_HOME"}
    assert doc["paths"]["lock"]["set_by"] is None and doc["paths"]["lock"]["path"].endswith("/superfluid.lock")
    assert doc["python"]["version"].count(".") == 2 and os.path.isabs(doc["python"]["executable"])
    basert = next(r for r in doc["runtimes"] if r["id"] == "basert")
    assert basert["current"] == "0.4.0-cpu"
    assert {i["install"]: i["state"] for i in basert["installed"]} == {"0.4.0-cpu": "ready", "0.3.1-cpu": "ready"}
    lines = text.stdout.splitlines()
    assert "    installed here: 0.4.0-cpu ready (current); 0.3.1-cpu ready" in lines
    assert f"  home            {home} (exists; set by SUPERFLUID_HOME)" in lines
    assert any(line.startswith("  Python          3.") for line in lines)
    assert not [n for n in os.listdir(doctor_home.basert) if n.startswith(".staging")]  # the probe left nothing


def test_the_paths_say_what_set_them(tmp_path: Path) -> None:
    env = cli.environment(None, HOME=str(tmp_path), SUPERFLUID_LOCK=str(tmp_path / "fleet.lock"),
                          DOCKER_CONFIG=str(tmp_path / "docker"))
    doc, text = _doctor(env, 0)
    paths = doc["paths"]
    assert (paths["home"]["path"], paths["home"]["set_by"]) == (str(tmp_path / ".superfluid"), None)
    assert paths["lock"] == {"path": str(tmp_path / "fleet.lock"), "exists": False, "set_by": "SUPERFLUID_LOCK"}
    assert paths["registry_login"] == {"path": str(tmp_path / "docker" / "config.json"), "exists": False,
                                       "set_by": "DOCKER_CONFIG"}
    lines = text.stdout.splitlines()
    assert f"  lock            {tmp_path / 'fleet.lock'} (not there; set by SUPERFLUID_LOCK)" in lines
    assert any(line.startswith(f"  home            {tmp_path / '.superfluid'} (") and line.endswith("; the default)")
               for line in lines)


def test_the_facts_say_the_distribution_kernel_level_and_what_was_not_read(tmp_path: Path) -> None:
    """A root laid out as Debian with an os-release, a kernel release, and a FIFO for proc/cpuinfo:
    the text says each fact its JSON holds, and names the file not read (the fact "not known")."""
    root = lay_out(tmp_path / "debian", "debian")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12"\n')
    (root / "proc" / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3 "
                                           "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave osxsave\n\n")
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text("6.1.0-test\n")
    env = cli.environment(tmp_path / "home", SUPERFLUID_HOST_ROOT=str(root), SUPERFLUID_HOST_OS="linux",
                          SUPERFLUID_HOST_ARCH="x64")
    doc, text = _doctor(env, 0)
    lines = text.stdout.splitlines()
    assert doc["host"]["x86_64_level"] == "v3" and "  CPU features    avx avx2 f16c fma (x86-64-v3)" in lines
    assert "  distribution    Debian GNU/Linux 12" in lines and "  kernel          6.1.0-test" in lines
    assert "  platform        linux-x64 (Linux x64) (set by SUPERFLUID_HOST_ARCH, SUPERFLUID_HOST_OS)" in lines
    (root / "proc" / "cpuinfo").unlink()
    os.mkfifo(root / "proc" / "cpuinfo")
    doc, text = _doctor(env, 0)
    [unread] = doc["host"]["unread"]
    assert unread["path"] == "/proc/cpuinfo" and "  CPU features    not known" in text.stdout.splitlines()
    assert f"  not known: /proc/cpuinfo is {unread['why']}" in text.stdout.splitlines()


# --- installs and current ------------------------------------------------------------------------------


DAMAGE = {"broken": lambda home: (home.basert / "0.4.0-cpu" / "lib" / "LICENSE").unlink(), "changed": _in_place}


@pytest.mark.parametrize("state", list(DAMAGE))
def test_a_broken_or_changed_install_is_a_problem_its_repair_fixes(doctor_home: Home, state: str) -> None:
    DAMAGE[state](doctor_home)
    doc, text = _doctor(doctor_home.env, 1)
    [problem] = _problems(doc, "install")
    assert problem["message"].startswith(f"basert 0.4.0-cpu is {state}: ")
    assert problem["fix"] == "superfluid runtime repair basert 0.4.0-cpu"
    line = next(line for line in _said(text) if "0.4.0-cpu" in line)
    assert line.startswith(f"  basert 0.4.0-cpu is {state}: ") and \
        "`superfluid runtime repair basert 0.4.0-cpu` puts it back" in line
    fixed = cli.paste(text.fix("repair"), text, env=doctor_home.env)
    assert fixed.code == 0, fixed.stderr
    after, _ = _doctor(doctor_home.env, 0)
    basert = next(r for r in after["runtimes"] if r["id"] == "basert")
    assert {i["install"]: i["state"] for i in basert["installed"]}["0.4.0-cpu"] == "ready"


def _link(target: str) -> Any:
    def make(current: Path) -> None:
        current.unlink()
        os.symlink(target, current)
    return make


def _file(current: Path) -> None:
    current.unlink()
    current.write_text("0.4.0-cpu\n")


def _folder(current: Path) -> None:
    current.unlink()
    current.mkdir()


def _gone(current: Path) -> None:
    current.unlink()


CURRENTS = {"to-etc": _link("/etc"), "dangling": _link("0.9.9-cpu"), "loop": _link("current"), "dot": _link("."),
            "a-file": _file, "a-folder": _folder, "missing": _gone}


@pytest.mark.parametrize("pinned", [None, "0.3.1-cpu"], ids=["auto", "pinned"])
@pytest.mark.parametrize("how", list(CURRENTS))
def test_a_current_that_names_no_install_is_put_back_by_use(doctor_home: Home, how: str,
                                                            pinned: str | None) -> None:
    """The fix points ``current`` at the install it should name: the pinned one, pinned again (the
    user's choice kept), else the best with ``--auto``; no install is touched."""
    if pinned is not None:
        assert doctor_home.sf("runtime", "use", "basert", pinned).code == 0
    CURRENTS[how](doctor_home.basert / "current")
    doc, text = _doctor(doctor_home.env, 1)
    [problem] = _problems(doc, "current")
    assert problem["message"].startswith("basert"), problem
    assert doc["problems"] == [problem]  # the installs are fine
    want = ("superfluid", "runtime", "use", "basert", pinned or "--auto")
    assert problem["fixes"][0]["argv"] == list(want)
    fix = text.fix("use")
    assert fix.argv == want
    fixed = cli.paste(fix, text, env=doctor_home.env)
    assert fixed.code == 0, fixed.stderr
    assert doctor_home.current() == (pinned or "0.4.0-cpu")
    pin = doctor_home.basert / "pinned"
    assert (pin.read_text().strip() if pin.exists() else None) == pinned
    _doctor(doctor_home.env, 0)


def test_a_current_whose_install_is_broken_is_put_back_after_its_repair(doctor_home: Home) -> None:
    """``current`` dangling, and the install it should name (the pinned one) broken: its repair comes
    first (a fix), ``current`` says so (advice, no command that would fail); then ``use`` of the pin."""
    assert doctor_home.sf("runtime", "use", "basert", "0.4.0-cpu").code == 0
    (doctor_home.basert / "0.4.0-cpu" / "lib" / "LICENSE").unlink()
    _link("0.9.9-cpu")(doctor_home.basert / "current")
    doc, text = _doctor(doctor_home.env, 1)
    assert [p["problem"] for p in doc["problems"]] == ["install", "current"]
    current = doc["problems"][1]
    assert (current["fix"], current["advice"]) == (None, "repair 0.4.0-cpu first (above); doctor then names what "
                                                         "points current at it")
    assert cli.paste(text.fix("repair"), text, env=doctor_home.env).code == 0
    doc, text = _doctor(doctor_home.env)
    if doc["problems"]:  # the repair left current as it was: doctor names the pin's use
        assert [p["fix"] for p in doc["problems"]] == ["superfluid runtime use basert 0.4.0-cpu"]
        assert cli.paste(text.fix("use"), text, env=doctor_home.env).code == 0
    assert doctor_home.current() == "0.4.0-cpu"
    _doctor(doctor_home.env, 0)


def test_an_install_made_for_another_host_is_a_problem_with_advice(doctor_home: Home) -> None:
    """A home copied from another platform: its installs are "not for this host"; no command fixes
    that but installing again there, which the advice says."""
    env = {**doctor_home.env, "SUPERFLUID_HOST_ARCH": "arm64" if "x64" in _platform() else "x64"}
    doc, text = _doctor(env, 1)
    problems = _problems(doc, "install")
    assert [p["message"].split(":")[0] for p in problems] == ["basert 0.4.0-cpu is not for this host",
                                                              "basert 0.3.1-cpu is not for this host"]
    assert all(p["fix"] is None and p["advice"] == "install basert again on this host" for p in problems)
    assert text.fixes == ()


def _platform() -> str:
    return detect({}).platform


# --- a GPU build where no device runs it --------------------------------------------------------------------


def test_a_gpu_build_no_device_runs_is_a_problem(tmp_path: Path, cuda_build: tuple[Path, Path],
                                                 libllama_v2: Path) -> None:
    """A CUDA build (real files: a ggml backend module registering a CUDA device over a stub
    ``libcudart``, ``test_cudart_retry``) installed on a host whose NVIDIA driver is stated, then the
    doctor of the same home where no driver is: the build runs on nothing here. The fixes install the
    cpu build (no other install runs here), then remove the CUDA one."""
    lib, runtime = cuda_build
    server = ReleaseServer()  # never started: written as a mirror folder
    server.add_release("ggml-org/llama.cpp", "b11642", {
        CUDA_MAIN: libllama_archive(lib), CUDART: _tar_gz({"libcudart.so.12": runtime / "libcudart.so.12"}),
        "llama-b11642-bin-ubuntu-x64.tar.gz": libllama_archive(libllama_v2)})
    home = tmp_path / "home"
    env = cli.environment(home, SUPERFLUID_MIRROR=str(server.write_mirror(tmp_path / "mirror")),
                          SUPERFLUID_HOST_VULKAN="0", SUPERFLUID_HOST_NVIDIA_DRIVER="550.54.15",
                          SUPERFLUID_HOST_CUDA_CAPABILITY="8.6")
    done = cli.run("superfluid", "runtime", "install", "llamacpp", "--json", env=env)
    assert done.code == 0 and done.json()["installed"] == "b11642-cuda-12.8", done.stderr
    del env["SUPERFLUID_HOST_CUDA_CAPABILITY"]
    env["SUPERFLUID_HOST_NVIDIA_DRIVER"] = "none"
    doc, text = _doctor(env, 1)
    [problem] = _problems(doc, "device")
    assert problem["message"] == ("llamacpp b11642-cuda-12.8 is a cuda-12.8 build no device here runs: it needs an "
                                  "NVIDIA driver, and none was found")
    assert [f["argv"] for f in problem["fixes"]] == [
        ["superfluid", "runtime", "install", "llamacpp", "--backend", "cpu"],
        ["superfluid", "runtime", "remove", "llamacpp", "b11642-cuda-12.8"]]
    installed = cli.paste(text.fix("install"), text, env=env)
    assert installed.code == 0, installed.stderr
    assert (home / "runtimes" / "llamacpp" / "b11642-cpu").is_dir()
    doc, text = _doctor(env, 1)
    [problem] = _problems(doc, "device")
    assert [f["argv"][2] for f in problem["fixes"]] == ["remove"]  # a cpu build runs here now
    removed = cli.paste(text.fix("remove"), text, env=env)
    assert removed.code == 0, removed.stderr
    assert not (home / "runtimes" / "llamacpp" / "b11642-cuda-12.8").exists()
    _doctor(env, 0)


# --- the cache ---------------------------------------------------------------------------------------------


def test_a_cache_holding_what_a_prune_removes_is_a_problem_prune_fixes(doctor_home: Home) -> None:
    """150 MB of an archive no install needs, last used 60 days ago (sparse: no disk is spent)."""
    blob = doctor_home.path / "cache" / "sha256" / ("ab" * 32)
    blob.write_bytes(gzip.compress(b"an archive of a removed install"))
    os.truncate(blob, 150 * 10**6)
    old = time.time() - 60 * 86400
    os.utime(blob, (old, old))
    doc, text = _doctor(doctor_home.env, 1)
    [problem] = _problems(doc, "cache")
    assert problem["message"].startswith(f"the download cache {doctor_home.path / 'cache'} holds 150.0 MB (1 file)")
    assert problem["fix"] == "superfluid cache prune"
    pruned = cli.paste(text.fix("cache", "prune"), text, env=doctor_home.env)
    assert pruned.code == 0, pruned.stderr
    assert not blob.exists()
    _doctor(doctor_home.env, 0)
    basert = doctor_home.sf("runtime", "verify", "basert")  # what an install needs stayed
    assert basert.code == 0, basert.stderr


# --- trust roots -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def short_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real export (``superfluid-manifest export --tuf-keys``) whose root expires in 10 days."""
    from superfluid.manifest import minisign
    from tests.manifest.release_folders import base_document, vary, write_release

    base = tmp_path_factory.mktemp("export")
    key = minisign.generate()
    write_release(base / "releases", "0.9.0", vary(base_document(), "0.9.0", abi=2, line=None), key)
    (base / "release.pub").write_text(key.public().to_text())
    made = cli.run("superfluid-manifest", "keys", "init", base / "keys", timeout=60)
    assert made.code == 0, made.stderr
    done = cli.run("superfluid-manifest", "export", "--source", base / "releases", "--key", base / "release.pub",
                   "--tuf-keys", base / "keys", "--expires", "root=10d", base / "site")
    assert done.code == 0, done.stderr
    return base / "site"


def test_a_kept_root_that_expires_soon_is_a_problem_with_advice(tmp_path: Path, short_export: Path) -> None:
    env = cli.environment(tmp_path / "home")
    asked = cli.run("superfluid", "compat", "--service", str(short_export), "--runtime", "basert", "--abi", "2",
                    "--trust-root", str(short_export / "metadata" / "1.root.json"), env=env)
    assert asked.code == 0, asked.stderr
    doc, text = _doctor(env, 1)
    [problem] = _problems(doc, "trust-root")
    kept = next((tmp_path / "home" / "trust").iterdir()) / "root_history" / "1.root.json"
    assert problem["message"].startswith(f"the manifest service's TUF root kept at {kept} expires at ")
    assert ", in 9 days: its answers are refused from then on" in problem["message"]
    assert problem["fix"] is None and problem["advice"].startswith("ask the service's operator to sign a newer root")
    assert text.fixes == ()


NOW = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize(("left", "said"), [
    (datetime.timedelta(days=400), None),
    (TRUST_NOTICE + datetime.timedelta(seconds=1), None),
    (TRUST_NOTICE, "expires at 2026-03-31T00:00:00Z, in 30 days"),
    (datetime.timedelta(hours=5), "expires at 2026-03-01T05:00:00Z, in 0 days"),
    (datetime.timedelta(0), "expired at 2026-03-01T00:00:00Z"),
    (-datetime.timedelta(days=3), "expired at 2026-02-26T00:00:00Z"),
], ids=["a-year", "just-over", "30-days", "hours", "now", "expired"])
def test_when_a_root_is_said_to_expire(left: datetime.timedelta, said: str | None) -> None:
    problem = expiry_problem("/r.json", NOW + left, NOW)
    assert (problem and problem.message) == (said and f"the manifest service's TUF root kept at /r.json {said}: its "
                                                      "answers are refused from then on")


# --- the home and its filesystem ---------------------------------------------------------------------------


def test_a_home_that_is_a_file_is_a_problem_with_advice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder\n")
    doc, text = _doctor(cli.environment(home), 1)
    [problem] = doc["problems"]
    assert (problem["problem"], problem["fix"]) == ("home", None)
    assert problem["message"] == f"SUPERFLUID_HOME ({home}) is a file, not a directory: nothing can be installed there"
    assert problem["advice"] == "point SUPERFLUID_HOME at a writable directory (or unset it for ~/.superfluid)"
    assert _said(text) == [f"  {problem['message']}: {problem['advice']}"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace (scripts/system-tools) is needed")
def test_a_filesystem_without_an_atomic_exchange_is_a_problem_with_advice(doctor_home: Home) -> None:
    """``renameat2`` answering EINVAL, as a filesystem without ``RENAME_EXCHANGE`` does (strace
    injects it into the real command): an install there is replaced in two renames."""
    prefix = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=renameat2", "-e", "inject=renameat2:error=EINVAL",
              "--"]
    done = cli.run("superfluid", "doctor", "--json", env=doctor_home.env, prefix=prefix)
    assert done.code == 1, done.stderr
    [problem] = done.json()["problems"]
    assert problem["problem"] == "filesystem" and problem["fix"] is None
    assert problem["message"].startswith(f"{doctor_home.basert} is on a filesystem without an atomic exchange")
    assert problem["advice"].startswith("keep SUPERFLUID_HOME on a local filesystem that has it")
    assert not [n for n in os.listdir(doctor_home.basert) if n.startswith(".staging")]
