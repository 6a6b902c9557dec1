"""The compat manifest service end to end (issue 10): ``superfluid-manifest serve`` on loopback over a
directory of release folders as ``ci/pack`` writes them — three good releases that drive different
baseRT ABIs and llama.cpp builds, one tampered after signing, one unsigned while a key is configured —
every ``choose`` answer over real HTTP, the static export's bytes, the same application under
gunicorn, GitHub and mirror sources through the loopback release server, reloading under load, and
``superfluid compat --service``; then the WSGI application in process. (``superfluid-manifest``'s
command line is ``test_command.py``.)"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SecretKey, generate, parse_signature, verify
from superfluid.manifest.sources import DirectorySource
from superfluid.runtime.kernel.schema import errors
from tests import cli
from tests.manifest.release_folders import base_document, vary, write_release
from tests.release_server import ReleaseServer

REPO = "acme/superfluid"
GOOD = ["0.3.0", "0.2.0", "0.1.0"]  # newest first
TAMPERED, UNSIGNED = "0.2.1", "0.1.1"


@dataclass(frozen=True)
class Releases:
    root: Path
    key: SecretKey
    public: Path


def _release_folders(root: Path, key: SecretKey) -> None:
    doc = base_document()
    write_release(root, "r0.1.0", vary(doc, "0.1.0", builds=[("b11642", "v2"), ("b11284", "v1")]), key)
    write_release(root, "r0.2.0", vary(doc, "0.2.0", abi=2, line=None, builds=[("b11669", "v2"), ("b11642", "v2")]),
                  key)
    write_release(root, "r0.3.0", vary(doc, "0.3.0", abi=2, line=None, builds=[("b11739", "v2")]), key)
    tampered = write_release(root, "r0.2.1", vary(doc, "0.2.1", abi=2, line=None, builds=[("b11642", "v2")]), key)
    sdist_doc = tampered / "superfluid_toolchain-0.2.1.tar.gz.compat.json"  # it now claims b11549 too
    sdist_doc.write_bytes(sdist_doc.read_bytes().replace(b'"b11642"', b'"b11549"', 1))
    write_release(root, "r0.1.1", vary(doc, "0.1.1"), None)


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> Releases:
    root = tmp_path_factory.mktemp("releases")
    key = generate()
    public = tmp_path_factory.mktemp("keys") / "release.pub"
    public.write_text(key.public().to_text())
    _release_folders(root, key)
    return Releases(root, key, public)


@pytest.fixture(scope="module")
def service_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("home")
    return cli.environment(home / "sf", HOME=str(home))  # gunicorn keeps its control socket under HOME


class Served:
    """A server started as a subprocess (a command of the test environment); its base URL read from what it prints."""

    def __init__(self, argv: list[str], env: Mapping[str, str], pattern: str) -> None:
        self.proc = cli.start(*argv, env=env, stdout=subprocess.DEVNULL)
        self.lines: list[str] = []
        deadline = time.monotonic() + 15
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if pattern in line:
                self.url = line.split(pattern, 1)[1].split()[0].rstrip("/")
                break
            if time.monotonic() > deadline:
                break
        else:
            raise AssertionError(f"{argv[0]} did not start: {''.join(self.lines)}")
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def serve(source: str, env: Mapping[str, str], *flags: str) -> Served:
    return Served(["superfluid-manifest", "serve", "--source", source, "--port", "0", "--quiet",
                   *flags], env, "serving on ")


@pytest.fixture(scope="module")
def manifest_service(releases: Releases, service_env: dict[str, str]) -> Iterator[Served]:
    """``superfluid-manifest serve`` over the release folders, for the whole module."""
    served = serve(str(releases.root), service_env, "--key", str(releases.public))
    yield served
    assert served.stop() == 0


def get(base: str, path: str, headers: Mapping[str, str] | None = None,
        method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request(method, path, headers=dict(headers or {}))
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def get_json(base: str, path: str) -> Any:
    status, _, body = get(base, path)
    assert status == 200, body
    return json.loads(body)


# -- the answers over HTTP ------------------------------------------------------------------------


def test_releases_newest_first_and_the_rejected_with_the_reason(manifest_service: Served, releases: Releases) -> None:
    answer = get_json(manifest_service.url, "/v1/releases")
    assert errors(answer, "manifest-releases") == []
    assert [r["version"] for r in answer["releases"]] == GOOD
    assert all(r["verified"] == releases.key.id for r in answer["releases"])
    rejected = {r["version"]: r["reason"] for r in answer["rejected"]}
    assert set(rejected) == {TAMPERED, UNSIGNED}
    assert f"does not verify with trusted key {releases.key.id}" in rejected[TAMPERED]
    assert "is unsigned" in rejected[UNSIGNED] and "every release must be signed" in rejected[UNSIGNED]
    assert [f"rejected {v}" in "".join(manifest_service.lines) for v in (TAMPERED, UNSIGNED)] == [True, True]


CHOOSE = [
    pytest.param("/v1/choose/basert/abi/1", ["0.1.0"], "abi", id="basert-abi-1"),
    pytest.param("/v1/choose/basert/abi/2", ["0.3.0", "0.2.0"], "abi", id="basert-abi-2"),
    pytest.param("/v1/choose/basert/abi/3", [], None, id="basert-abi-3"),
    pytest.param("/v1/choose/basert/version/0.3.0", ["0.1.0"], "line", id="basert-unnumbered-0.3"),
    pytest.param("/v1/choose/basert/version/0.2.6", [], None, id="basert-unnumbered-0.2"),
    pytest.param("/v1/choose/llamacpp/build/b11642", ["0.2.0", "0.1.0"], "tested", id="llamacpp-b11642"),
    pytest.param("/v1/choose/llamacpp/build/b11739", ["0.3.0"], "tested", id="llamacpp-b11739"),
    pytest.param("/v1/choose/llamacpp/build/b11549", [], None, id="llamacpp-b11549-only-the-tampered-claims-it"),
    pytest.param("/v1/choose/llamacpp/build/b11284?platform=linux-x64", ["0.1.0"], "tested", id="llamacpp-platform"),
    pytest.param("/v1/choose/mlx/version/0.32.2", GOOD, "tested", id="mlx"),
    pytest.param("/v1/choose/mlx/version/0.32.2/linux-x64", [], None, id="mlx-linux"),
    pytest.param("/v1/choose?runtime=basert&abi=2", ["0.3.0", "0.2.0"], "abi", id="query-form"),
]


@pytest.mark.parametrize(("path", "drives", "by"), CHOOSE)
def test_every_choose_answer(manifest_service: Served, path: str, drives: list[str], by: str | None) -> None:
    answer = get_json(manifest_service.url, path)
    assert errors(answer, "manifest-choose") == []
    assert [r["version"] for r in answer["drives"]] == drives
    assert {r["by"] for r in answer["drives"]} <= {by}
    shown = [r["version"] for r in answer["drives"] + answer["others"]]
    assert sorted(shown) == sorted(GOOD)  # the tampered and the unsigned are never chosen, never answered as good
    assert {r["version"] for r in answer["rejected"]} == {TAMPERED, UNSIGNED}


def test_basert_why(manifest_service: Served) -> None:
    answer = get_json(manifest_service.url, "/v1/choose/basert/abi/2")
    rows = {r["version"]: r for r in answer["drives"] + answer["others"]}
    assert (rows["0.3.0"]["short"], rows["0.1.0"]["short"]) == ("ABI 2", "ABI 2; this superfluid drives ABI 1")
    line = get_json(manifest_service.url, "/v1/choose/basert/version/0.3.0")["drives"][0]
    assert line["short"] == "unnumbered, of ABI 1's 0.3 line"


@pytest.mark.parametrize(("one", "same"), [
    ("/v1/choose?runtime=basert&abi=2", "/v1/choose/basert/abi/2.json"),
    ("/v1/choose?runtime=llamacpp&build=b11642&platform=linux-x64", "/v1/choose/llamacpp/build/b11642/linux-x64.json"),
    ("/v1/choose/mlx/version/0.32.2?platform=macos-arm64", "/v1/choose/mlx/version/0.32.2/macos-arm64"),
    ("/v1/releases", "/v1/releases.json"),
    ("/", "/index.html"),
])
def test_each_spelling_answers_the_same_bytes(manifest_service: Served, one: str, same: str) -> None:
    assert get(manifest_service.url, one)[2] == get(manifest_service.url, same)[2]


def test_one_release_carries_its_exact_document_and_signature(manifest_service: Served, releases: Releases) -> None:
    answer = get_json(manifest_service.url, "/v1/releases/0.2.0")
    assert errors(answer, "manifest-release") == []
    name = "superfluid_toolchain-0.2.0.tar.gz.compat.json"
    assert answer["document_name"] == name and answer["verified"] == releases.key.id
    assert answer["document"].encode() == (releases.root / "r0.2.0" / name).read_bytes()
    assert answer["signature"] == (releases.root / "r0.2.0" / (name + ".minisig")).read_text()
    signature = parse_signature(answer["signature"], "answer")
    assert verify(answer["document"].encode(), signature, [releases.key.public()], where="answer").id == releases.key.id


@pytest.mark.parametrize(("version", "fragment"), [(TAMPERED, "was rejected: "), (UNSIGNED, "was rejected: "),
                                                   ("9.9.9", "no verified release 9.9.9")])
def test_a_rejected_or_unknown_release_is_a_404(manifest_service: Served, version: str, fragment: str) -> None:
    status, headers, body = get(manifest_service.url, f"/v1/releases/{version}")
    answer = json.loads(body)
    assert status == 404 and errors(answer, "manifest-error") == []
    assert answer["parameter"] == "version" and fragment in answer["error"]
    assert headers["cache-control"] == "no-cache" and "etag" not in headers


def test_etag_and_cache_control(manifest_service: Served) -> None:
    status, headers, body = get(manifest_service.url, "/v1/choose/basert/abi/2")
    assert status == 200 and headers["cache-control"] == "public, max-age=60"
    assert headers["content-type"] == "application/json; charset=utf-8" and int(headers["content-length"]) == len(body)
    etag = headers["etag"]
    for sent in (etag, f'"other", {etag}', f"W/{etag}", "*"):
        status, again, body304 = get(manifest_service.url, "/v1/choose/basert/abi/2", {"If-None-Match": sent})
        assert (status, again["etag"], body304) == (304, etag, b""), sent
    assert get(manifest_service.url, "/v1/choose/basert/abi/2", {"If-None-Match": '"other"'})[0] == 200
    assert get(manifest_service.url, "/v1/choose/basert/abi/1")[1]["etag"] != etag
    head = get(manifest_service.url, "/v1/choose/basert/abi/2", method="HEAD")
    assert head[0] == 200 and head[2] == b"" and head[1]["etag"] == etag


@pytest.mark.parametrize(("method", "path", "status", "parameter"), [
    ("GET", "/v1/nothing", 404, "path"),
    ("GET", "/v1/choose/cuda/abi/2", 404, "runtime"),
    ("GET", "/v1/choose/basert/abi/two", 400, "abi"),
    ("GET", "/v1/choose/llamacpp/build/11642", 400, "build"),
    ("GET", "/v1/choose/basert/abi/2?platform=beos-x64", 400, "platform"),
    ("GET", "/v1/choose?runtime=basert", 400, "abi"),
    ("GET", "/v1/releases?x=1", 400, "x"),
    ("GET", "/v1/releases/%2e%2e", 400, "version"),
    ("POST", "/v1/releases", 405, "method"),
])
def test_bad_requests_answer_json_naming_the_parameter(manifest_service: Served, method: str, path: str, status: int,
                                                       parameter: str) -> None:
    got, headers, body = get(manifest_service.url, path, method=method)
    answer = json.loads(body)
    assert got == status and answer["parameter"] == parameter and answer["status"] == status
    assert errors(answer, "manifest-error") == [] and "Traceback" not in body.decode()


def test_health(manifest_service: Served, releases: Releases) -> None:
    status, headers, body = get(manifest_service.url, "/health")
    answer = json.loads(body)
    assert status == 200 and headers["cache-control"] == "no-store"
    assert (answer["status"], answer["releases"], answer["rejected"], answer["keys"]) == ("ok", 3, 2, [releases.key.id])


# -- the static export, the command line ------------------------------------------------------------


def _manifest(env: Mapping[str, str], *args: str) -> cli.Run:
    return cli.run("superfluid-manifest", *args, env=env, timeout=60)


@pytest.fixture(scope="module")
def exported(releases: Releases, service_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "site"
    done = _manifest(service_env, "export", "--source", str(releases.root), "--key", str(releases.public), str(out))
    assert done.code == 0, done.stderr
    return out


def test_the_export_answers_the_same_bytes_at_the_same_paths(manifest_service: Served, exported: Path) -> None:
    files = sorted(p for p in exported.rglob("*") if p.is_file())
    paths = {"/" + p.relative_to(exported).as_posix() for p in files}
    assert {"/index.html", "/v1/releases.json", "/v1/releases/0.1.0.json", "/v1/choose/basert/abi/2.json",
            "/v1/choose/basert/abi/2/linux-x64.json", "/v1/choose/llamacpp/build/b11739.json",
            "/v1/choose/basert/version/0.3.0.json", "/v1/choose/mlx/version/0.32.2/macos-arm64.json"} <= paths
    assert not any(v in p for p in paths for v in (TAMPERED, UNSIGNED))
    for path in paths:
        status, _, body = get(manifest_service.url, path)
        assert status == 200 and body == (exported / path.lstrip("/")).read_bytes(), path
    assert "0.2.0" in (exported / "index.html").read_text()


def test_export_again_replaces_its_own_and_nothing_else(releases: Releases, service_env: dict[str, str],
                                                        exported: Path, tmp_path: Path) -> None:
    again = shutil.copytree(exported, tmp_path / "site")
    (again / "v1/releases/9.9.9.json").write_text("stale\n")
    done = _manifest(service_env, "export", "--source", str(releases.root), "--key", str(releases.public), str(again))
    assert done.code == 0 and not (again / "v1/releases/9.9.9.json").exists()
    other = tmp_path / "not-an-export"
    other.mkdir()
    (other / "precious").write_text("mine\n")
    done = _manifest(service_env, "export", "--source", str(releases.root), str(other))
    assert done.code == 2 and "neither empty nor an earlier export" in done.stderr
    assert (other / "precious").read_text() == "mine\n" and len(list(other.iterdir())) == 1


def _sf(env: Mapping[str, str], *args: str) -> cli.Run:
    return cli.run("superfluid", *args, env=env, timeout=60)


def test_superfluid_compat_asks_the_service_and_a_static_export(manifest_service: Served, exported: Path,
                                                                service_env: dict[str, str]) -> None:
    done = _sf(service_env, "compat", "--service", manifest_service.url, "--runtime", "basert", "--abi", "2",
               "--insecure-no-freshness")
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("releases that drive basert ABI 2, newest first")
    assert [line.split()[0] for line in lines[2:4]] == ["0.3.0", "0.2.0"]
    assert "rejected by the service, never chosen:" in done.stdout and f"  {TAMPERED} (r0.2.1): " in done.stdout
    served = json.loads(get(manifest_service.url, "/v1/choose/llamacpp/build/b11642/linux-x64.json")[2])
    for url in (manifest_service.url, str(exported), exported.as_uri()):
        done = _sf({**service_env, "SUPERFLUID_MANIFEST_URL": url}, "compat", "--runtime", "llamacpp", "--build",
                   "b11642", "--platform", "linux-x64", "--json", "--insecure-no-freshness")
        assert done.code == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer.pop("freshness") == {"checked": False}  # asked unchecked (test_tuf_export asks checked)
        assert answer.pop("service").rstrip("/").endswith(urlsplit(url).path.rstrip("/")) and answer == served


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (["--runtime", "basert", "--abi", "02"], 2, "--abi: abi '02' is malformed"),
    (["--runtime", "llamacpp", "--abi", "2"], 2, "llamacpp is asked by build, not by abi"),
    (["--runtime", "basert"], 2, "needs one of --abi or --version"),
    (["--runtime", "gpu", "--abi", "2"], 2, "no runtime 'gpu'"),
    (["--runtime", "basert", "--abi", "2", "--platform", "linux"], 2, "--platform: platform 'linux'"),
    (["--runtime", "basert", "--abi", "2", "--release", "x.json"], 2, "give one or the other"),
])
def test_superfluid_compat_refuses_a_bad_question_before_asking(args: list[str], code: int, fragment: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from superfluid.cli import main

    assert main(["compat", "--service", "http://127.0.0.1:9/", *args]) == code  # nothing listens: nothing is asked
    out, err = capsys.readouterr()
    assert fragment in err and out == "", err


def test_superfluid_compat_a_value_the_export_does_not_hold(exported: Path, service_env: dict[str, str]) -> None:
    done = _sf(service_env, "compat", "--service", str(exported), "--runtime", "basert", "--abi", "7",
               "--insecure-no-freshness")
    assert done.code == 1 and "has no answer for basert ABI 7" in done.stderr and "Traceback" not in done.stderr
    done = _sf(service_env, "compat", "--runtime", "basert", "--abi", "7")
    assert done.code == 2 and "SUPERFLUID_MANIFEST_URL" in done.stderr


# -- reloading, gunicorn, GitHub and mirror sources -------------------------------------------------


def test_reloads_on_change_without_dropping_requests(releases: Releases, service_env: dict[str, str],
                                                     tmp_path: Path) -> None:
    root = tmp_path / "live"
    for name in ("r0.1.0", "r0.2.0"):
        shutil.copytree(releases.root / name, root / name)
    served = serve(str(root), service_env, "--key", str(releases.public), "--ttl", "0.05")
    failures: list[str] = []
    seen: set[tuple[str, ...]] = set()
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            try:
                status, _, body = get(served.url, "/v1/choose/basert/abi/2")
                if status != 200:
                    failures.append(f"HTTP {status}")
                    continue
                seen.add(tuple(r["version"] for r in json.loads(body)["drives"]))
            except (OSError, ValueError) as e:
                failures.append(repr(e))

    workers = [threading.Thread(target=client) for _ in range(8)]
    try:
        for w in workers:
            w.start()
        time.sleep(0.3)
        shutil.copytree(releases.root / "r0.3.0", root / ".r0.3.0")  # written aside, then renamed in
        os.rename(root / ".r0.3.0", root / "r0.3.0")
        deadline = time.monotonic() + 5
        while ("0.3.0", "0.2.0") not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        os.rename(root / "r0.2.0", tmp_path / "gone")
        while ("0.3.0",) not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for w in workers:
            w.join()
        assert served.stop() == 0
    assert failures == []
    assert {("0.2.0",), ("0.3.0", "0.2.0"), ("0.3.0",)} <= seen <= {("0.2.0",), ("0.3.0", "0.2.0"), ("0.3.0",)}


def test_the_same_application_under_gunicorn(manifest_service: Served, releases: Releases,
                                             service_env: dict[str, str]) -> None:
    gunicorn = Served(["gunicorn", "--workers", "2", "--bind", "127.0.0.1:0",
                       "--graceful-timeout", "5", "superfluid.manifest.service:app"],
                      {**service_env, "SUPERFLUID_MANIFEST_SOURCE": str(releases.root),
                       "SUPERFLUID_MANIFEST_KEYS": str(releases.public)}, "Listening at: ")
    try:
        for path in ("/v1/releases.json", "/v1/releases/0.1.0.json", "/v1/choose/basert/abi/2.json",
                     "/v1/choose?runtime=llamacpp&build=b11642", "/v1/choose/mlx/version/0.32.2/linux-x64", "/"):
            for _ in range(3):  # more than one worker answers
                status, headers, body = get(gunicorn.url, path)
                assert (status, body) == (200, get(manifest_service.url, path)[2]), path
        status, headers, body = get(gunicorn.url, "/v1/choose/basert/abi/x")
        assert status == 400 and json.loads(body)["parameter"] == "abi"
        assert get(gunicorn.url, "/v1/releases", {"If-None-Match": headers.get("etag", "") or
                                                  get(gunicorn.url, "/v1/releases")[1]["etag"]})[0] == 304
    finally:
        assert gunicorn.stop() == 0


def _publish(server: ReleaseServer, root: Path) -> None:
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        assets = {p.name: p.read_bytes() for p in folder.iterdir()}
        version = next(n for n in assets if n.endswith(".tar.gz")).split("-")[1].removesuffix(".tar.gz")
        server.add_release(REPO, f"v{version}", assets)


@pytest.mark.parametrize("kind", ["github", "mirror"])
def test_github_and_mirror_sources(releases: Releases, service_env: dict[str, str], tmp_path: Path, kind: str) -> None:
    with ReleaseServer() as github:
        _publish(github, releases.root)
        source = f"github:{REPO}" if kind == "github" else f"{github.mirror_url}{REPO}/"
        served = serve(source, {**service_env, "SUPERFLUID_HOME": str(tmp_path), "SUPERFLUID_GITHUB_API": github.url,
                                "GITHUB_TOKEN": "t0ken"}, "--key", str(releases.public))
        try:
            answer = get_json(served.url, "/v1/releases")
            assert [r["version"] for r in answer["releases"]] == GOOD
            assert {r["version"]: r["where"] for r in answer["rejected"]} == {TAMPERED: "v0.2.1", UNSIGNED: "v0.1.1"}
            assert all(r["tarball_check"] == "checked" for r in answer["releases"])  # the listing's digests
            drives = get_json(served.url, "/v1/choose/llamacpp/build/b11642")["drives"]
            assert [r["version"] for r in drives] == ["0.2.0", "0.1.0"]
        finally:
            assert served.stop() == 0
        if kind == "github":
            listed = github.requests_to(f"/repos/{REPO}/releases")
            assert listed and all(r.header("Authorization") == "Bearer t0ken" for r in listed)
            assert not any(r.header("Authorization") for r in github.requests_to(f"/{REPO}/releases/download/"))
            tarball = f"/{REPO}/releases/download/v0.1.0/superfluid_toolchain-0.1.0.tar.gz"
            assert not [r for r in github.requests_to(tarball) if r.path == tarball]  # the listing's digest is used


def test_the_load_benchmark_runs_bounded(service_env: dict[str, str]) -> None:
    """benchmarks/bench_manifest.py, small: both servers answer every request (scripts/bench runs it full)."""
    from tests.conftest import ROOT

    done = subprocess.run([cli.script("python"), str(ROOT / "benchmarks" / "bench_manifest.py"), "--requests", "90",
                           "--clients", "6", "--json"], env=service_env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert set(results) == {"superfluid-manifest serve", "gunicorn -w 4"}
    assert all(r["requests"] == 90 and r["failed"] == 0 and r["rps"] > 0 for r in results.values())


# -- the WSGI application in process: reloading, a source gone, the environment ---------------------


def _call(app: Any, path: str, query: str = "", **headers: str) -> tuple[str, dict[str, str], bytes]:
    got: dict[str, Any] = {}

    def start_response(status: str, hdrs: list[tuple[str, str]]) -> None:
        got.update(status=status, headers={k.lower(): v for k, v in hdrs})

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
               **{f"HTTP_{k.upper()}": v for k, v in headers.items()}}
    body = b"".join(app(environ, start_response))
    return got["status"], got["headers"], body


def test_a_source_that_cannot_be_read_keeps_the_last_good_answers(tmp_path: Path, doc: dict[str, Any],
                                                                  key: SecretKey, trusted: list[TrustedKey]) -> None:
    from superfluid.manifest.service import Service, ServiceConfig

    root = tmp_path / "releases"
    write_release(root, "a", vary(doc, "0.1.0"), key)
    now = [0.0]
    service = Service(DirectorySource(root), trusted, ServiceConfig(ttl=10), clock=lambda: now[0])
    status, headers, body = _call(service, "/v1/choose/basert/abi/1")
    assert status == "200 OK" and [r["version"] for r in json.loads(body)["drives"]] == ["0.1.0"]
    write_release(root, "b", vary(doc, "0.2.0"), key)
    assert _call(service, "/v1/choose/basert/abi/1")[2] == body  # within the TTL: not looked at
    now[0] = 11
    again = _call(service, "/v1/choose/basert/abi/1")
    assert [r["version"] for r in json.loads(again[2])["drives"]] == ["0.2.0", "0.1.0"]
    assert again[1]["etag"] != headers["etag"]
    shutil.rmtree(root)
    now[0] = 22
    assert _call(service, "/v1/choose/basert/abi/1")[2] == again[2]  # the last good index still answers
    health = json.loads(_call(service, "/health")[2])
    assert health["status"] == "stale" and "cannot be listed" in health["error"]


def test_no_index_yet_answers_503(tmp_path: Path) -> None:
    from superfluid.manifest.service import Service

    gone = tmp_path / "gone"
    gone.mkdir()
    source = DirectorySource(gone)
    gone.rmdir()
    status, headers, body = _call(Service(source, []), "/v1/releases")
    assert status.startswith("503") and json.loads(body)["parameter"] == "source"
    assert _call(Service(source, []), "/health")[0].startswith("503")


@pytest.mark.parametrize(("variables", "fragment"), [
    ({}, "SUPERFLUID_MANIFEST_SOURCE is not set"),
    ({"SUPERFLUID_MANIFEST_SOURCE": "/nonexistent/releases"}, "no such directory"),
    ({"SUPERFLUID_MANIFEST_SOURCE": ".", "SUPERFLUID_MANIFEST_TTL": "soon"},
     "SUPERFLUID_MANIFEST_TTL='soon': expected a number of seconds from 0 to 31536000"),
    ({"SUPERFLUID_MANIFEST_SOURCE": ".", "SUPERFLUID_MANIFEST_TTL": "nan"}, "SUPERFLUID_MANIFEST_TTL='nan': expected"),
    ({"SUPERFLUID_MANIFEST_SOURCE": ".", "SUPERFLUID_MANIFEST_MAX_AGE": "-1"},
     "SUPERFLUID_MANIFEST_MAX_AGE='-1': expected"),
])
def test_the_application_misconfigured_answers_503_with_the_reason(monkeypatch: pytest.MonkeyPatch,
                                                                   variables: dict[str, str], fragment: str) -> None:
    from superfluid.manifest import service

    for name in ("SUPERFLUID_MANIFEST_SOURCE", "SUPERFLUID_MANIFEST_KEYS", "SUPERFLUID_MANIFEST_TTL",
                 "SUPERFLUID_MANIFEST_MAX_AGE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    status, _, body = _call(service._FromEnvironment(), "/v1/releases")
    answer = json.loads(body)
    assert status.startswith("503") and answer["parameter"] == "configuration" and fragment in answer["error"]


def test_the_application_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, doc: dict[str, Any],
                                              key: SecretKey) -> None:
    from superfluid.manifest import service

    write_release(tmp_path / "r", "a", vary(doc, "0.1.0"), key)
    (tmp_path / "k.pub").write_text(key.public().to_text())
    monkeypatch.setenv("SUPERFLUID_MANIFEST_SOURCE", str(tmp_path / "r"))
    monkeypatch.setenv("SUPERFLUID_MANIFEST_KEYS", f"{tmp_path / 'nothing.pub'}:{tmp_path / 'k.pub'}")
    status, _, body = _call(service._FromEnvironment(), "/v1/releases")
    assert status.startswith("503") and "nothing.pub" in json.loads(body)["error"]  # a named key must read
    monkeypatch.setenv("SUPERFLUID_MANIFEST_KEYS", str(tmp_path / "k.pub"))
    monkeypatch.setenv("SUPERFLUID_MANIFEST_MAX_AGE", "5")
    app = service._FromEnvironment()
    status, headers, body = _call(app, "/v1/releases.json")
    assert status == "200 OK" and headers["cache-control"] == "public, max-age=5"
    assert json.loads(body)["keys"] == [key.id]
    assert _call(app, "/v1/releases.json", if_none_match=headers["etag"])[0] == "304 Not Modified"
