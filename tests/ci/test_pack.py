"""``ci/pack``: the release files it writes, checked with the real tools (``sha256sum``, ``minisign``,
a fresh venv's ``superfluid``), and its refusals (SPEC §5.2, §8.3, §9)."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from superfluid.runtime import registry
from superfluid.runtime.kernel.schema import errors
from tests import cli
from tests.ci.conftest import KeyPair, Packed, ci_env, make_key_pair, run_ci, run_minisign
from tests.conftest import ROOT

SIDECARS = (".sha256", ".compat.json", ".compat.json.minisig")


@pytest.mark.slow
def test_pack_writes_each_artifact_with_its_three_sidecars(packed: Packed) -> None:
    names = sorted(p.name for p in packed.out.iterdir())
    sdist, wheel = packed.artifact(".tar.gz"), packed.artifact(".whl")
    assert sdist.name.startswith("superfluid_toolchain-") and wheel.name.endswith("-py3-none-any.whl")
    assert names == sorted(a.name + s for a in (sdist, wheel) for s in ("", *SIDECARS))
    assert sorted(p.name for p in packed.written) == names  # it prints exactly what it wrote
    assert f"signed with key {packed.keys.key_id}" in packed.done.stderr


@pytest.mark.slow
def test_sha256_files_pass_sha256sum(packed: Packed) -> None:
    for artifact in (packed.artifact(".tar.gz"), packed.artifact(".whl")):
        line = (artifact.parent / f"{artifact.name}.sha256").read_text()
        assert line.endswith(f"  {artifact.name}\n") and len(line.split()[0]) == 64 and line == line.lower()
        done = subprocess.run(["sha256sum", "-c", f"{artifact.name}.sha256"], cwd=artifact.parent,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0 and done.stdout == f"{artifact.name}: OK\n", done.stderr


@pytest.mark.slow
def test_compat_json_names_its_artifact_and_is_valid(packed: Packed) -> None:
    for artifact in (packed.artifact(".tar.gz"), packed.artifact(".whl")):
        doc = json.loads((artifact.parent / f"{artifact.name}.compat.json").read_text())
        assert errors(doc, "compat") == []
        digest = (artifact.parent / f"{artifact.name}.sha256").read_text().split()[0]
        release = doc["release"]
        assert (release["name"], release["tarball"]) == ("superfluid-toolchain", artifact.name)
        assert release["sha256"] == digest
        assert artifact.name.startswith(f"superfluid_toolchain-{release['version']}")
        assert "unanswered" not in doc and set(doc["runtimes"]) == set(registry.IDS)


@pytest.mark.slow
def test_real_minisign_verifies_every_signature(packed: Packed) -> None:
    for doc in packed.out.glob("*.compat.json"):
        done = run_minisign("-Vm", str(doc), "-p", str(packed.keys.public))
        assert done.returncode == 0, done.stderr
        assert "Trusted comment: timestamp:" in done.stdout and f"\tfile:{doc.name}\thashed" in done.stdout


@pytest.mark.slow
def test_superfluid_verifies_every_document_and_its_tarball(packed: Packed, tmp_path: Path) -> None:
    env = _sf_env(tmp_path)
    for doc in packed.out.glob("*.compat.json"):
        done = _sf(env, "compat", "--release", str(doc), "--key", str(packed.keys.public), "--json")
        assert done.code == 0, done.stderr
        verification = json.loads(done.stdout)["verification"]
        assert verification["verdict"] == f"verified by key {packed.keys.key_id}"
        assert verification["tarball"] == "checked" and verification["key"] == str(packed.keys.public)


@pytest.mark.slow
def test_one_changed_byte_fails_minisign_and_superfluid(packed: Packed, tmp_path: Path) -> None:
    wheel = packed.artifact(".whl")
    for name in (f"{wheel.name}.compat.json", f"{wheel.name}.compat.json.minisig", wheel.name):
        (tmp_path / name).write_bytes((packed.out / name).read_bytes())
    doc = tmp_path / f"{wheel.name}.compat.json"
    body = bytearray(doc.read_bytes())
    at = body.index(b'"abi": 1') + len(b'"abi": ')
    body[at] = ord("2")  # one byte: basert's ABI 1 becomes 2
    doc.write_bytes(bytes(body))
    real = run_minisign("-Vm", str(doc), "-p", str(packed.keys.public))
    assert real.returncode == 1 and "Signature verification failed" in real.stderr
    done = _sf(_sf_env(tmp_path), "compat", "--release", str(doc), "--key", str(packed.keys.public))
    assert done.code == 1 and done.stdout == ""
    assert (f"superfluid: {doc}: its signature does not verify with trusted key {packed.keys.key_id}: the file "
            f"was changed after it was signed") in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_document_equals_the_wheel_in_a_fresh_venv(packed: Packed, tmp_path: Path) -> None:
    """What ci/pack wrote for the wheel is, less ``release``, what that wheel answers once installed
    into another fresh venv (not the source tree's editable install)."""
    wheel = packed.artifact(".whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(wheel)], check=True, capture_output=True, timeout=900)
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import superfluid; print(superfluid.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path)
    assert where.stdout.startswith(str(venv)) and str(ROOT) not in where.stdout
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "SUPERFLUID_HOME": str(home), "HOME": str(tmp_path)}
    done = cli.run(venv / "bin" / "superfluid", "compat", "--json", env=env, cwd=tmp_path, timeout=300)
    assert done.code == 0, done.stderr
    answered = json.loads(done.stdout)
    written = json.loads((packed.out / f"{wheel.name}.compat.json").read_text())
    answered.pop("release"), written.pop("release")
    assert written == answered


@pytest.mark.slow
def test_no_secret_key_material_in_the_output_or_the_logs(packed: Packed) -> None:
    secret_b64 = packed.keys.secret_line
    raw = base64.b64decode(secret_b64)
    seed = raw[62:94]
    needles = [secret_b64.encode(), seed, seed.hex().encode(), base64.b64encode(seed)]
    blobs = {p.name: p.read_bytes() for p in packed.out.iterdir()}
    blobs["sdist, uncompressed"] = gzip.decompress(blobs[packed.artifact(".tar.gz").name])
    with zipfile.ZipFile(packed.artifact(".whl")) as whl:
        blobs.update({f"wheel:{n}": whl.read(n) for n in whl.namelist()})
    blobs["stdout"], blobs["stderr"] = packed.done.stdout.encode(), packed.done.stderr.encode()
    for where, blob in blobs.items():
        for needle in needles:
            assert needle not in blob, f"secret key material in {where}"


@pytest.mark.parametrize(("env", "args", "fragment"), [
    pytest.param({}, (), "no signing key: set SUPERFLUID_SIGNING_KEY_FILE", id="no-key"),
    pytest.param({"SUPERFLUID_SIGNING_KEY_FILE": "{secret}", "SUPERFLUID_SIGNING_KEY": "{content}"}, (),
                 "both SUPERFLUID_SIGNING_KEY_FILE and SUPERFLUID_SIGNING_KEY are set", id="two-keys"),
    pytest.param({"SUPERFLUID_SIGNING_KEY_FILE": "{secret}"}, ("--unsigned",),
                 "--unsigned, and a signing key is given in {secret}", id="key-and-unsigned"),
])
def test_refused_before_anything_is_built(key_pair: KeyPair, tmp_path: Path, env: dict[str, str],
                                          args: tuple[str, ...], fragment: str) -> None:
    subs = {"secret": str(key_pair.secret), "content": key_pair.secret.read_text()}
    out = tmp_path / "dist"
    done = run_ci("pack", "--out", str(out), *args, env=ci_env(**{k: v.format(**subs) for k, v in env.items()}),
                  timeout=120)
    assert done.returncode == 2 and f"ci/pack: {fragment.format(**subs)}" in done.stderr
    assert not out.exists() and done.stdout == ""
    assert key_pair.secret_line not in done.stderr


def test_refuses_an_output_folder_that_is_not_empty(key_pair: KeyPair, tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "old.whl").write_bytes(b"stale")
    done = run_ci("pack", "--out", str(tmp_path / "dist"), env=ci_env(SUPERFLUID_SIGNING_KEY_FILE=str(key_pair.secret)),
                  timeout=120)
    assert done.returncode == 2 and "not an empty directory" in done.stderr
    assert [p.name for p in (tmp_path / "dist").iterdir()] == ["old.whl"]


@pytest.mark.parametrize(("content", "fragment"), [
    pytest.param("untrusted comment: x\nnot base64 at all\n", "is not a minisign secret key", id="garbage"),
    pytest.param("{public}", "is not a minisign secret key", id="a-public-key"),
])
def test_a_key_that_is_not_a_secret_key_is_refused(key_pair: KeyPair, tmp_path: Path, content: str,
                                                  fragment: str) -> None:
    content = content.format(public=key_pair.public.read_text())
    done = run_ci("pack", "--out", str(tmp_path / "dist"), env=ci_env(SUPERFLUID_SIGNING_KEY=content), timeout=120)
    assert done.returncode == 1
    assert f"ci/pack: the secret key in SUPERFLUID_SIGNING_KEY: {fragment}" in done.stderr
    assert not (tmp_path / "dist").exists()


def test_an_encrypted_key_is_refused_with_the_fix(tmp_path: Path) -> None:
    secret = tmp_path / "enc.key"
    made = run_minisign("-G", "-p", str(tmp_path / "enc.pub"), "-s", str(secret), stdin="pw\npw\n")
    assert made.returncode == 0, made.stderr
    done = run_ci("pack", "--out", str(tmp_path / "dist"), env=ci_env(SUPERFLUID_SIGNING_KEY_FILE=str(secret)),
                  timeout=120)
    assert done.returncode == 1
    assert f"ci/pack: {secret}: is encrypted with a password, which this signer does not read: remove the " \
           f"password with minisign -C -W -s FILE" in done.stderr


def test_keygen_writes_minisigns_own_pair(tmp_path: Path) -> None:
    done = run_ci("keygen", str(tmp_path / "k"), env=ci_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    secret, public = tmp_path / "k" / "minisign.key", tmp_path / "k" / "minisign.pub"
    assert secret.stat().st_mode & 0o777 == 0o600
    assert public.read_text().startswith("untrusted comment: minisign public key ")
    assert secret.read_text().splitlines()[1] not in done.stdout + done.stderr
    message = tmp_path / "m.txt"
    message.write_text("hello\n")
    signed = run_minisign("-S", "-s", str(secret), "-m", str(message))
    assert signed.returncode == 0, signed.stderr
    assert run_minisign("-Vm", str(message), "-p", str(public)).returncode == 0
    again = run_ci("keygen", str(tmp_path / "k"), env=ci_env(), timeout=120)
    assert again.returncode == 2 and "already exists" in again.stderr


def test_keygen_refuses_a_folder_inside_the_checkout() -> None:
    target = ROOT / ".cache" / "keygen-test-never-written"
    done = run_ci("keygen", str(target), env=ci_env(), timeout=120)
    assert done.returncode == 2 and "inside the project checkout" in done.stderr
    assert not target.exists()


def test_keygen_pair_signs_a_pack_run_too(tmp_path: Path) -> None:
    """The other maker of keys (ci/keygen) gives a key ci/pack reads: checked without building,
    through the library call ci/pack makes."""
    from superfluid.manifest.keys import signing_key

    pair = make_key_pair(tmp_path / "real")
    done = run_ci("keygen", str(tmp_path / "ours"), env=ci_env(), timeout=120)
    assert done.returncode == 0
    for secret in (pair.secret, tmp_path / "ours" / "minisign.key"):
        found = signing_key(path=str(secret))
        assert found is not None and found[1] == str(secret)
        assert secret.read_text().splitlines()[1] not in repr(found)


def _sf_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "sfhome"
    home.mkdir(exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "SUPERFLUID_HOME": str(home), "HOME": str(tmp_path)}


def _sf(env: dict[str, str], *args: str) -> cli.Run:
    return cli.run("superfluid", *args, env=env)
