"""The fixes ``superfluid-manifest`` gives are commands the suite pastes (issue 42, design point 2): a
``--tuf-keys`` folder that holds no key set names ``keys init`` for it; an export whose root expired
names the ``rotate-root`` that signs the next. Each pasted as a user would, then the refused line
runs again and holds."""

from __future__ import annotations

import time
from pathlib import Path

from tests import cli


def _manifest(tmp_path: Path, *argv: str | Path) -> cli.Run:
    return cli.run("superfluid-manifest", *argv, env=cli.environment(tmp_path / "home"), cwd=tmp_path, timeout=60)


def test_a_folder_without_a_key_set_names_keys_init_for_it(tmp_path: Path) -> None:
    (source := tmp_path / "releases").mkdir()
    (keys := tmp_path / "keys").mkdir()
    line = ("export", "--source", source, "--tuf-keys", keys, tmp_path / "site")
    refused = _manifest(tmp_path, *line)
    assert refused.code == 2 and f"--tuf-keys {keys} holds no keys.json" in refused.stderr, refused.stderr
    fix = refused.fix("keys", "init")
    assert fix.argv == ("superfluid-manifest", "keys", "init", str(keys)) and fix.does == "makes a key set there"
    cli.paste(fix, refused, env=cli.environment(tmp_path / "home"), cwd=tmp_path)
    assert (keys / "keys.json").is_file()  # it made the key set
    assert _manifest(tmp_path, *line).code == 0


def test_an_expired_root_names_the_rotate_root_that_signs_the_next(tmp_path: Path) -> None:
    (source := tmp_path / "releases").mkdir()
    site = tmp_path / "site"
    assert _manifest(tmp_path, "keys", "init", tmp_path / "keys").code == 0
    line = ("export", "--source", source, "--tuf-keys", tmp_path / "keys", site)
    first = _manifest(tmp_path, *line, "--expires", "root=1s")
    assert first.code == 0, first.stderr
    time.sleep(1.2)
    refused = _manifest(tmp_path, *line)
    assert refused.code == 2 and "1.root.json expired at" in refused.stderr, refused.stderr
    fix = refused.fix("rotate-root")
    assert fix.argv == ("superfluid-manifest", "rotate-root", "--tuf-keys", str(tmp_path / "keys"), str(site))
    cli.paste(fix, refused, env=cli.environment(tmp_path / "home"), cwd=tmp_path)
    assert (site / "metadata" / "2.root.json").is_file()  # the next root, signed
    assert _manifest(tmp_path, *line).code == 0
