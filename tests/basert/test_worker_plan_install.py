"""``superfluid-worker-basert plan`` and ``install --into DIR --plan JSON``, run as programs.

``plan`` is answered for hosts named by ``SUPERFLUID_HOST_*`` from the recipe's pins. ``install`` is
given a directory whose ``lib`` holds a real reference engine (each variant, as the installer would
leave it after extracting); each run is a child process, so a crash in the library fails the test.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from basert_helpers import LIB_NAME, WORKER, lib_path

from superfluid.runtime.kernel.receipt import read_receipt
from tests import cli
from tests.conftest import printed_receipt

PROG = "superfluid-worker-basert"
MACOS = {"SUPERFLUID_HOST_OS": "macos", "SUPERFLUID_HOST_ARCH": "arm64", "SUPERFLUID_HOST_NVIDIA_DRIVER": "none"}
LINUX_ARM = {"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "arm64",
             "SUPERFLUID_HOST_NVIDIA_DRIVER": "580.95.05", "SUPERFLUID_HOST_CUDA_RUNTIME": "none",
             "SUPERFLUID_HOST_ROCM": "0", "SUPERFLUID_HOST_VULKAN": "0"}
#: the reference engine's own platform, for which the recipe pins nothing
LINUX_X64 = {**LINUX_ARM, "SUPERFLUID_HOST_ARCH": "x64", "SUPERFLUID_HOST_NVIDIA_DRIVER": "none"}
RELEASE = "https://github.com/basecompute/baseRT/releases/download"
DIGEST = hashlib.sha256(b"a verified bundle").hexdigest()


def worker(env: dict[str, str], *args: str | Path) -> cli.Run:
    assert WORKER.exists(), f"{WORKER} is missing: install the package (scripts/setup-env)"
    return cli.run(WORKER, *args, env=env, timeout=60)


def plan(env: dict[str, str], host: dict[str, str], *flags: str) -> dict[str, Any]:
    done = worker({**env, **host}, "plan", *flags)
    assert done.code == 0, done.stderr
    assert done.stdout.count("\n") == 1 and done.stderr == ""  # one line of JSON
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def refused(env: dict[str, str], host: dict[str, str], *flags: str) -> str:
    done = worker({**env, **host}, "plan", *flags)
    assert done.code == 1 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.startswith(f"{PROG}: ") and done.stderr.count("\n") == 1
    return done.stderr


# -- plan ----------------------------------------------------------------------------------------

def test_plan_on_apple_silicon_is_the_newest_driven_pin(clean_env: dict[str, str]) -> None:
    answer = plan(clean_env, MACOS)
    assert answer["describe"] == "macOS arm64" and answer["host"]["os"] == "macos"
    assert answer["plans"] == [  # the installer's rule, from the recipe alone: the newest release it drives
        {"id": "basert", "version": "0.4.0", "backend": "metal", "install": "0.4.0-metal",
         "assets": [{"name": "basert-engine-macos-arm64-0.4.0.tar.gz",
                     "url": f"{RELEASE}/v0.4.0/basert-engine-macos-arm64-0.4.0.tar.gz", "sha256": None, "size": None,
                     "digest_source": "release", "checked": []}],
         "tested": True, "chosen_by": "pin", "abi": 1,
         "why": "macOS arm64: baseRT 0.4.0 states ABI 1, the ABI this superfluid drives (as this superfluid's recipe "
                "pins it); pinned in this superfluid's recipe; the metal bundle",
         "platform": "macos-arm64",
         # who builds it, as the recipe names it: an asset's Sigstore bundle must prove it
         "built_by": {"repository": "basecompute/baseRT", "workflow": None, "ref": "refs/tags/v*"}},
    ]


def test_plan_on_linux_arm64_needs_the_nvidia_driver_or_a_named_backend(clean_env: dict[str, str]) -> None:
    answer = plan(clean_env, LINUX_ARM)
    assert [(p["install"], p["assets"][0]["name"]) for p in answer["plans"]] == [
        ("0.4.0-cuda", "basert-engine-linux-arm64-cuda-0.4.0.tar.gz")]
    assert answer["plans"][0]["why"].startswith("Linux arm64, NVIDIA driver 580.95.05: baseRT 0.4.0 states ABI 1")
    no_driver = {**LINUX_ARM, "SUPERFLUID_HOST_NVIDIA_DRIVER": "none"}
    assert "cuda: it needs an NVIDIA driver, and none was found" in refused(clean_env, no_driver)
    assert [p["install"] for p in plan(clean_env, no_driver, "--backend", "CUDA")["plans"]] == ["0.4.0-cuda"]
    assert refused(clean_env, MACOS, "--backend", "cuda") == (
        f"{PROG}: baseRT 0.4.0 has no cuda bundle for macos-arm64 (it has: metal): name one of those with "
        "--backend, or leave --backend out\n")


def test_a_platform_the_recipe_pins_nothing_for_is_left_to_the_installer(clean_env: dict[str, str]) -> None:
    why = refused(clean_env, LINUX_X64)
    assert why == (f"{PROG}: this superfluid's recipe pins no baseRT bundle for linux-x64 (this is Linux x64; it "
                   "pins bundles for linux-arm64, macos-arm64): use a mirror that carries one (--mirror URL|DIR), "
                   "or --from PATH|URL with --sha256\n")


def test_plan_a_named_version(clean_env: dict[str, str]) -> None:
    only = plan(clean_env, MACOS, "--version", "0.3.0")["plans"]
    assert [(p["install"], p["tested"], p["chosen_by"]) for p in only] == [("0.3.0-metal", True, "pin")]
    # a pin this build does not drive: refused by the ABI rule, planned untested with --untested
    assert refused(clean_env, MACOS, "--version", "0.2.6") == (
        f"{PROG}: baseRT 0.2.6 states no ABI number; this superfluid drives ABI 1, and only the unnumbered 0.3.x "
        "line carries ABI 1: the newest it drives is 0.4.0: `superfluid runtime install basert --version 0.2.6 "
        "--untested` installs 0.2.6 anyway\n")
    untested = plan(clean_env, MACOS, "--version", "0.2.6", "--untested")["plans"]
    assert len(untested) == 1
    assert {k: untested[0][k] for k in ("install", "tested", "chosen_by", "abi")} == {
        "install": "0.2.6-metal", "tested": False, "chosen_by": "untested", "abi": None}
    assert untested[0]["assets"][0]["sha256"] == "9bcb204b7cca56470edc41323650f97f5b5fb45499825565a476be508237c84a"
    assert "(UNTESTED: installed with --untested)" in untested[0]["why"]
    # a version the recipe does not pin: only the release listing knows it
    assert "baseRT 0.4.1 is not published" in refused(clean_env, MACOS, "--version", "0.4.1")


def test_plan_a_named_bundle(clean_env: dict[str, str]) -> None:
    bundle = "/srv/basert-engine-linux-x64-0.4.0.tar.gz"
    assert plan(clean_env, LINUX_X64, "--from", bundle, f"--sha256={DIGEST.upper()}")["plans"] == [
        {"id": "basert", "version": "0.4.0", "backend": "cpu", "install": "0.4.0-cpu",
         "assets": [{"name": "basert-engine-linux-x64-0.4.0.tar.gz", "url": bundle, "sha256": DIGEST, "size": None,
                     "digest_source": "flag", "checked": ["flag"]}],
         "tested": True, "chosen_by": "from", "abi": 1, "why": f"{bundle}, as named", "platform": "linux-x64"}]
    # a pinned file name takes the pin's digest and size; the probe decides whether it is driven
    pinned = plan(clean_env, MACOS, "--from", "https://mirror.invalid/basert-engine-macos-arm64-0.3.0.tar.gz",
                  "--untested")["plans"][0]
    assert pinned["assets"][0]["size"] == 26436926 and pinned["assets"][0]["sha256"].startswith("c81ede9f")
    assert (pinned["chosen_by"], pinned["abi"]) == ("from", None)
    assert refused(clean_env, MACOS, "--from", bundle) == (
        f"{PROG}: {bundle} is built for linux-x64; this is macOS arm64\n")


def test_sha256_names_the_first_plans_bundle_and_never_overrides_a_pin(clean_env: dict[str, str]) -> None:
    named = plan(clean_env, MACOS, "--sha256", DIGEST)["plans"]
    assert [(p["install"], p["assets"][0]["sha256"]) for p in named] == [("0.4.0-metal", DIGEST)]
    why = refused(clean_env, MACOS, "--version", "0.3.0", "--sha256", DIGEST)
    assert why == (f"{PROG}: basert-engine-macos-arm64-0.3.0.tar.gz: --sha256 {DIGEST} disagrees with the pin of "
                   "this superfluid's recipe c81ede9f41a5fe8636075ee41da5eb8c593c0acb85b6ffccfcef4af38a6e6dde: a pin "
                   "is never overridden; drop --sha256, or check the digest you passed\n")


@pytest.mark.parametrize(("flags", "message"), [
    (["--bogus"], "unknown flag --bogus"),
    (["--version"], "--version needs a value"),
    (["--backend", "metal", "--backend", "cpu"], "--backend is given twice"),
    (["--sha256", "xyz"], "--sha256 'xyz' is not a SHA-256 (64 hexadecimal digits)"),
    (["--untested=yes"], "--untested takes no value"),
    (["--from", "/srv/basert-engine-macos-arm64-0.4.0.tar.gz", "--version", "0.3.0"],
     "--version 0.3.0 disagrees with basert-engine-macos-arm64-0.4.0.tar.gz, which is version 0.4.0"),
])
def test_a_bad_plan_flag_is_a_usage_error(clean_env: dict[str, str], flags: list[str], message: str) -> None:
    done = worker({**clean_env, **MACOS}, "plan", *flags)
    assert done.code == 2 and done.stdout == ""
    assert done.stderr == f"{PROG}: {message}\n"


# -- install -------------------------------------------------------------------------------------

def extracted(into: Path, engines: Path, variant: str) -> Path:
    """``into/lib`` holding ``variant``'s libbaseRT, as the installer leaves it after extracting."""
    (into / "lib").mkdir(parents=True)
    shutil.copy2(lib_path(engines, variant), into / "lib" / LIB_NAME)
    return into


def bundle_plan(env: dict[str, str], version: str, *flags: str) -> dict[str, Any]:
    """The worker's own plan for a reference-engine bundle of ``version`` (Linux x64, by --from)."""
    name = f"basert-engine-linux-x64-{version}.tar.gz"
    return plan(env, LINUX_X64, "--from", f"/mirror/{name}", "--sha256", DIGEST, *flags)["plans"][0]


def install(env: dict[str, str], into: Path, p: dict[str, Any] | str) -> cli.Run:
    return worker({**env, **LINUX_X64}, "install", "--into", into, "--plan", p if isinstance(p, str) else json.dumps(p))


SERVES = [  # variant -> (abi, config_read)
    pytest.param("0.4.0", 1, "into", id="0.4.0"),
    pytest.param("0.3.1", 1, "by-value", id="0.3.1"),
    pytest.param("0.3.0", None, "by-value", id="0.3.0-unnumbered"),
]


@pytest.mark.parametrize(("variant", "abi", "config_read"), SERVES)
def test_install_writes_a_valid_receipt_for_a_library_it_drives(engines: Path, clean_env: dict[str, str],
                                                                tmp_path: Path, variant: str, abi: int | None,
                                                                config_read: str) -> None:
    into = extracted(tmp_path / "staging", engines, variant)
    written = printed_receipt(install(clean_env, into, bundle_plan(clean_env, variant)), into)
    # every file of DIR, as the installer's publish records them (runtime verify reads the list)
    lib = into / "lib" / LIB_NAME
    files = {f["path"]: f for f in written.pop("files")}
    assert set(files) == {str(p.relative_to(into)) for p in into.rglob("*") if p.is_file() and p.name != "runtime.json"}
    assert files[str(lib.relative_to(into))]["sha256"] == hashlib.sha256(lib.read_bytes()).hexdigest()
    assert files[str(lib.relative_to(into))]["size"] == lib.stat().st_size
    assert {k: v for k, v in written.items() if k != "installed_at"} == {
        "schema": "superfluid-runtime/1", "id": "basert", "install": f"{variant}-cpu", "version": variant,
        "backend": "cpu", "link_w": [8], "platforms": ["linux-x64"], "worker": "bin/superfluid-worker-basert",
        "sources": [{"url": f"/mirror/basert-engine-linux-x64-{variant}.tar.gz", "sha256": DIGEST}],
        "tested": True, "abi": abi, "chosen_by": "from", "config_read": config_read}
    receipt = read_receipt(into / "runtime.json")
    assert receipt.abi == abi and receipt.tested is True and receipt.installed_at
    # the installed library is the one check drives
    check = worker(clean_env, "check", "--basert-lib", into / "lib")
    report = json.loads(check.stdout)
    assert check.code == 0 and report["available"] is True and report["abi"] == abi


def test_the_installers_plan_chosen_by_abi_number_is_recorded_as_such(engines: Path, clean_env: dict[str, str],
                                                                     tmp_path: Path) -> None:
    into = extracted(tmp_path / "staging", engines, "0.4.0")
    # the shape the installer's resolver passes (installer.plans.Plan.to_json)
    p = {"id": "basert", "version": "0.4.0", "backend": "cpu", "install": "0.4.0-cpu",
         "assets": [{"name": "basert-engine-linux-x64-0.4.0.tar.gz", "url": "http://127.0.0.1:1/b.tar.gz",
                     "sha256": DIGEST.upper(), "size": 1234, "digest_source": "sidecar", "checked": ["sidecar"]}],
         "tested": True, "chosen_by": "abi", "abi": 1, "why": "…", "platform": "linux-x64"}
    done = install(clean_env, into, p)
    assert done.code == 0, done.stderr
    receipt = read_receipt(into / "runtime.json")
    assert (receipt.chosen_by, receipt.abi, receipt.tested) == ("abi", 1, True)
    assert receipt.sources[0].sha256 == DIGEST  # lower-cased


@pytest.mark.parametrize(("variant", "stated"), [
    pytest.param("0.5.0", 2, id="0.5.0-ABI-2"),
    pytest.param("0.2.6", None, id="0.2.6-unnumbered-off-the-line"),
])
def test_a_refusal_by_abi_alone_installs_only_from_an_untested_plan(engines: Path, clean_env: dict[str, str],
                                                                   tmp_path: Path, variant: str,
                                                                   stated: int | None) -> None:
    into = extracted(tmp_path / "staging", engines, variant)
    done = install(clean_env, into, bundle_plan(clean_env, variant))
    assert done.code == 1 and done.stdout == ""
    verdict = "states ABI 2; this superfluid drives ABI 1" if stated else "only the unnumbered 0.3.x line carries ABI 1"
    assert verdict in done.stderr
    assert done.stderr.rstrip("\n").endswith("--untested` installs it untested (recorded as untested)")
    assert not (into / "runtime.json").exists()

    done = install(clean_env, into, bundle_plan(clean_env, variant, "--untested"))
    assert done.code == 0, done.stderr
    receipt = read_receipt(into / "runtime.json")
    assert (receipt.version, receipt.tested, receipt.abi, receipt.chosen_by) == (variant, False, stated, "from")
    assert receipt.extra.pop("files") and receipt.extra == {"config_read": None}
    # installed untested, it still does not serve: the loader's verdict is the same
    check = worker(clean_env, "check", "--basert-lib", into / "lib")
    assert check.code == 1 and verdict in json.loads(check.stdout)["available"]


@pytest.mark.parametrize(("variant", "reason"), [
    pytest.param("missing-symbol", "lacks baseRT_decode_step", id="missing-symbol"),
    pytest.param("wrong-size", "in 1812 bytes where this superfluid expects 1792", id="wrong-size"),
])
@pytest.mark.parametrize("untested", [False, True], ids=["tested", "untested"])
def test_a_refusal_other_than_by_abi_is_final(engines: Path, clean_env: dict[str, str], tmp_path: Path,
                                              variant: str, reason: str, untested: bool) -> None:
    into = extracted(tmp_path / "staging", engines, variant)
    p = bundle_plan(clean_env, "0.3.0", *(["--untested"] if untested else []))
    done = install(clean_env, into, p)
    assert done.code == 1 and done.stdout == ""
    assert done.stderr.startswith(f"{PROG}: basert 0.3.0-cpu: the staged library was refused by its check: "
                                  "libbaseRT ") and reason in done.stderr
    assert str(into) not in done.stderr  # the staging folder, gone once an install ends, is not named
    assert not (into / "runtime.json").exists()


def test_the_library_must_be_the_release_the_plan_names(engines: Path, clean_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    into = extracted(tmp_path / "staging", engines, "0.3.1")
    done = install(clean_env, into, bundle_plan(clean_env, "0.4.0"))
    assert done.code == 1
    assert "the bundle of basert 0.4.0 holds a library of version 0.3.1: the release is not what it says" in done.stderr
    other = extracted(tmp_path / "other", engines, "0.5.0")
    p = bundle_plan(clean_env, "0.5.0", "--untested") | {"abi": 1}  # the plan's release states ABI 1
    done = install(clean_env, other, p)
    assert done.code == 1 and "its library states ABI 2, and the release states 1" in done.stderr
    assert not (into / "runtime.json").exists() and not (other / "runtime.json").exists()
    # a bundle named without a version ("custom") is whatever it holds
    custom = bundle_plan(clean_env, "0.4.0") | {"version": "custom", "install": "custom-cpu"}
    done = install(clean_env, extracted(tmp_path / "custom", engines, "0.4.0"), custom)
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["version"] == "custom"


def test_a_directory_without_libbasert_is_refused(clean_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    done = install(clean_env, tmp_path, bundle_plan(clean_env, "0.4.0"))
    names = " nor ".join((LIB_NAME, "libbaseRT.0.dylib" if LIB_NAME.endswith(".dylib") else "libbaseRT.so.0"))
    assert done.code == 1 and done.stdout == ""
    # the staged probe names the library with --lib (the adapter's probe line), and the check says so
    assert f"the staged library was refused by its check: --lib names the directory {tmp_path / 'lib'}, " \
           f"which holds neither {names}" in done.stderr
    assert not (tmp_path / "runtime.json").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--into", "D"], "install needs --into and --plan"),
    (["--plan", "{}"], "install needs --into and --plan"),
    (["--into", "D", "--plan", "{}", "--force"], "unknown flag --force"),
    (["--into", "D", "--plan", "[]"], "--plan: not a JSON object (it is a list)"),
    (["--into", "D", "--plan", '{"id": "llamacpp"}'], '--plan: a plan for "llamacpp" given to the basert runtime'),
])
def test_a_bad_install_line_is_a_usage_error(clean_env: dict[str, str], tmp_path: Path, argv: list[str],
                                             message: str) -> None:
    done = worker(clean_env, "install", *[str(tmp_path) if a == "D" else a for a in argv])
    assert done.code == 2 and done.stdout == ""
    assert done.stderr == f"{PROG}: {message}\n"


def test_a_plan_missing_what_the_receipt_is_made_of_is_a_usage_error(engines: Path, clean_env: dict[str, str],
                                                                     tmp_path: Path) -> None:
    into = extracted(tmp_path / "staging", engines, "0.4.0")
    good = bundle_plan(clean_env, "0.4.0")
    for key in ("version", "backend", "install", "assets"):
        done = install(clean_env, into, {k: v for k, v in good.items() if k != key})
        assert done.code == 2 and f"--plan: {key!r} must be" in done.stderr, done.stderr
    done = install(clean_env, into, good | {"abi": "1"})
    assert done.code == 2 and "--plan: 'abi' must be a non-negative integer or null (it is '1')" in done.stderr
    unverified = plan(clean_env, MACOS)["plans"][0]  # 0.4.0's digest is null until the installer settles it
    done = install(clean_env, into, unverified | {"id": "basert"})
    assert done.code == 2
    assert ("assets[0] (basert-engine-macos-arm64-0.4.0.tar.gz) has no 'sha256' of 64 hexadecimal digits (it has "
            "null); the installer passes the digest it verified") in done.stderr
    assert not (into / "runtime.json").exists()
