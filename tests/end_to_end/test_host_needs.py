"""What a build needs, through the real ``superfluid`` (issue 31): a release whose libllama needs
``GLIBC_2.99`` (a real build, one need raised in place) installs nothing and says why, and the
install falls back to an older good build; hosts laid out as Fedora (Vulkan in ``/usr/lib64``) and
Alpine (musl) plan as their libraries say, Alpine refusing glibc builds before any download; and
``superfluid doctor --json`` reports it all, valid against its schema."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest import minisign
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.schema import errors
from tests import cli
from tests.conftest import native_script
from tests.end_to_end.conftest import Home
from tests.end_to_end.releases import libllama_archive
from tests.release_server import ReleaseServer
from tests.runtime.fake_roots import lay_out

REPO = "ggml-org/llama.cpp"


@pytest.fixture(scope="module")
def raised_v1(tmp_path_factory: pytest.TempPathFactory, libllama_v1: Path) -> bytes:
    """The v1 build (b11312's tree) whose libllama needs GLIBC_2.99, packed as upstream names it."""
    into = tmp_path_factory.mktemp("raised") / "v1"
    native_script("raise_need").raise_need(libllama_v1, into)
    return libllama_archive(into)


@pytest.fixture(scope="module")
def raised_v2(tmp_path_factory: pytest.TempPathFactory, libllama_v2: Path) -> bytes:
    into = tmp_path_factory.mktemp("raised") / "v2"
    native_script("raise_need").raise_need(libllama_v2, into)
    return libllama_archive(into)


def _llamacpp(home: Home) -> list[str]:
    root = home.path / "runtimes" / "llamacpp"
    return sorted(n for n in os.listdir(root) if not n.startswith(".")) if root.is_dir() else []


def test_a_build_for_a_newer_glibc_installs_nothing_and_says_why(cli_home: Home, tmp_path: Path,
                                                                  raised_v1: bytes) -> None:
    """Issue 31, done when: --untested, from a mirror folder: exit 1, nothing published, the message
    names GLIBC_2.99 and this host's glibc, and does not tell the user to install a tested build."""
    server = ReleaseServer()  # never started: written as a mirror folder
    server.add_release(REPO, "b11312", {"llama-b11312-bin-ubuntu-x64.tar.gz": raised_v1})
    mirror = server.write_mirror(tmp_path / "mirror")
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    run = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", str(mirror), "--version", "b11312",
                              "--untested")
    assert run.code == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert "GLIBC_2.99" in run.stderr and f"this host has glibc {detect({}).glibc}" in run.stderr
    assert "made for a newer distribution" in run.stderr
    assert "lists as tested" not in run.stderr and "install a build" not in run.stderr
    assert "`superfluid runtime versions llamacpp" in run.stderr and "lists the builds that install here" in run.stderr
    assert _llamacpp(cli_home) == []
    fix = run.fix("versions")  # issue 42: the hint is a value, pasted as printed (the mirror kept)
    assert fix.argv == ("superfluid", "runtime", "versions", "llamacpp", "--mirror", str(mirror))
    cli.paste(fix, run, env=cli_home.env)


def test_the_builds_that_install_here_are_listed_from_the_mirror(cli_home: Home, tmp_path: Path,
                                                                  raised_v1: bytes) -> None:
    """The refusal's hint does what it says: it lists the builds of the mirror the install named."""
    server = ReleaseServer()
    server.add_release(REPO, "b11312", {"llama-b11312-bin-ubuntu-x64.tar.gz": raised_v1})
    mirror = server.write_mirror(tmp_path / "mirror")
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    run = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", str(mirror), "--version", "b11312",
                              "--untested")
    listed = cli.paste(run.fix("versions"), run, env=cli_home.env)
    assert listed.code == 0 and "b11312" in listed.stdout, listed.stdout + listed.stderr


def _document(tmp: Path, key: minisign.SecretKey, builds: tuple[str, ...]) -> tuple[Path, Path]:
    """A signed compat document of superfluid 0.9.0 testing ``builds`` (layout v2); (it, its key)."""
    done = cli.run("superfluid", "compat", "--json", timeout=60)
    assert done.code == 0, done.stderr
    doc: dict[str, Any] = copy.deepcopy(json.loads(done.stdout))
    doc["release"] = {"name": "superfluid", "version": "0.9.0"}
    doc["runtimes"]["llamacpp"]["tested"] = [{"build": b, "layout": "v2"} for b in builds]
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "superfluid-0.9.0.compat.json"
    body = (json.dumps(doc, indent=2) + "\n").encode()
    path.write_bytes(body)
    (tmp / (path.name + ".minisig")).write_text(minisign.sign(body, key, trusted_comment="superfluid 0.9.0").to_text())
    (tmp / "minisign.pub").write_text(key.public().to_text())
    return path, tmp / "minisign.pub"


def test_the_older_good_build_installs_and_the_skip_is_said(cli_home: Home, tmp_path: Path, raised_v2: bytes,
                                                             libllama_v2: Path, key: minisign.SecretKey) -> None:
    """Issue 31, done when: with an older good build in the same mirror and no --version, the install
    takes the good one and says why it skipped the other. The release planned for tests b11669 (its
    libllama needs GLIBC_2.99) and b11642 (a good build): the only older build our own recipe tests,
    b11284, is pinned to upstream's digests."""
    server = ReleaseServer()
    server.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": libllama_archive(libllama_v2)})
    server.add_release(REPO, "b11669", {"llama-b11669-bin-ubuntu-x64.tar.gz": raised_v2})
    mirror = server.write_mirror(tmp_path / "mirror")
    doc, pub = _document(tmp_path / "doc", key, ("b11669", "b11642"))
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    flags = ("--mirror", str(mirror), "--for", str(doc), "--key", str(pub))
    run = cli_home.superfluid("runtime", "install", "llamacpp", *flags, "--json")
    assert run.code == 0, run.stderr
    out = run.json()
    assert out["installed"] == "b11642-cpu"
    assert out["fallbacks"][0]["install"] == "b11669-cpu"
    assert "GLIBC_2.99" in out["fallbacks"][0]["why"] and "newer distribution" in out["fallbacks"][0]["why"]
    assert _llamacpp(cli_home) == ["b11642-cpu", "current"]
    again = cli_home.superfluid("runtime", "install", "llamacpp", *flags, "--reinstall")
    assert again.code == 0, again.stderr
    assert "llamacpp b11669-cpu does not run here (" in again.stderr and "GLIBC_2.99" in again.stderr
    assert "falling back to the next" in again.stderr


@pytest.fixture
def llama_release(release_server: ReleaseServer, libllama_v2: Path) -> ReleaseServer:
    data = libllama_archive(libllama_v2)
    release_server.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": data,
                                                "llama-b11642-bin-ubuntu-vulkan-x64.tar.gz": data})
    return release_server


def test_a_fedora_layout_offers_the_vulkan_plan(cli_home: Home, tmp_path: Path, llama_release: ReleaseServer) -> None:
    """Issue 31, done when: a root laid out as Fedora's (/usr/lib64/libvulkan.so.1, an ICD file) plans
    Vulkan first; Debian's layout without a loader does not (the Vulkan loader was looked for under
    /usr/lib only, and Fedora's never found)."""
    cli_home.env["SUPERFLUID_HOST_ROOT"] = str(lay_out(tmp_path / "fedora", "fedora"))
    run = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", llama_release.mirror_url, "--dry-run",
                              "--json")
    assert run.code == 0, run.stderr
    plans = run.json()["plans"]
    assert [p["install"] for p in plans][:2] == ["b11642-vulkan", "b11642-cpu"]
    assert "refused" not in plans[0] and plans[0]["needs"]["libraries"] == ["libvulkan.so.1"]
    assert errors(run.json(), "plan") == []
    doctor = cli_home.superfluid("doctor", "--json").json()
    assert doctor["host"]["vulkan"] is True and doctor["host"]["libraries"]["libvulkan.so.1"] == "/lib64/libvulkan.so.1"
    assert next(r for r in doctor["runtimes"] if r["id"] == "llamacpp")["installs"]["install"] == "b11642-vulkan"
    cli_home.env["SUPERFLUID_HOST_ROOT"] = str(lay_out(tmp_path / "debian", "debian"))
    plans = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", llama_release.mirror_url, "--dry-run",
                                "--json").json()["plans"]
    assert [p["install"] for p in plans] == ["b11642-cpu"]  # b11284 is not in this mirror: no fallback of it


def test_an_alpine_layout_refuses_glibc_builds_before_any_download(cli_home: Home, tmp_path: Path,
                                                                   llama_release: ReleaseServer) -> None:
    """Issue 31, done when: a root laid out as Alpine's (musl): every llama.cpp plan is refused with
    the reason before a byte of its archive is fetched; --dry-run, versions and doctor say why."""
    cli_home.env["SUPERFLUID_HOST_ROOT"] = str(lay_out(tmp_path / "alpine", "alpine"))
    dry = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", llama_release.mirror_url, "--dry-run",
                              "--json")
    assert dry.code == 1, dry.stderr  # the recipe alone refuses every plan: said before the listing (issue 42)
    assert errors(dry.json(), "plan") == [] and dry.json()["error"]["code"] == "not-installable"
    assert all("this host's C library is musl" in p["refused"] for p in dry.json()["plans"])
    text = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", llama_release.mirror_url, "--dry-run")
    assert text.code == 1 and "b11642-cpu: llama-b11642-bin-ubuntu-x64.tar.gz needs glibc (GLIBC_2.34); this host's " \
        "C library is musl" in text.stderr
    llama_release.clear_log()
    run = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", llama_release.mirror_url)
    assert run.code == 1 and "Traceback" not in run.stderr, run.stderr
    assert "no llamacpp build installs here: b11642-cpu: llama-b11642-bin-ubuntu-x64.tar.gz needs glibc (GLIBC_2.34)" \
        in run.stderr
    assert "this build is made for glibc distributions" in run.stderr
    assert llama_release.log == []  # not even the listing was asked
    assert _llamacpp(cli_home) == []
    rows = cli_home.superfluid("runtime", "versions", "llamacpp", "--json").json()
    assert errors(rows, "versions") == []
    assert all(r["installs"] is not True and "musl" in r["installs"] and r["refused"] for r in rows)
    shown = cli_home.superfluid("runtime", "versions", "llamacpp")
    assert "b11642: b11642-cpu is refused here: " in shown.stdout


def test_doctor_reports_the_host_and_each_runtime(cli_home: Home, tmp_path: Path) -> None:
    """Issue 31, done when: doctor --json validates against its schema and reports glibc, libstdc++'s
    newest GLIBCXX_, the library directories and, per runtime, the chosen plan and the refused ones."""
    run = cli_home.superfluid("doctor", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert errors(doc, "doctor") == []
    here = detect({})
    assert (doc["host"]["glibc"], doc["host"]["glibcxx"]) == (here.glibc, here.glibcxx)
    assert doc["host"]["library_dirs"] == list(here.library_dirs)
    assert [r["id"] for r in doc["runtimes"]] == list(registry.IDS)
    assert {r["backend"] for r in next(r for r in doc["runtimes"] if r["id"] == "llamacpp")["refused"]} >= {"metal"}
    text = cli_home.superfluid("doctor")
    assert text.code == 0 and f"glibc {here.glibc}" in text.stdout and "llamacpp: installs " in text.stdout
    cli_home.env["SUPERFLUID_HOST_ROOT"] = str(lay_out(tmp_path / "alpine", "alpine"))
    musl = cli_home.superfluid("doctor", "--json").json()
    assert errors(musl, "doctor") == [] and musl["host"]["libc"] == "musl" and musl["host"]["glibc"] is None
    llama = next(r for r in musl["runtimes"] if r["id"] == "llamacpp")
    assert llama["installs"] is None and all("musl" in r["why"] for r in llama["refused"] if r["install"])
