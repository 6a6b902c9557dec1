"""The static export: every answer of the manifest service as a file at the path the server answers.

See docs/manifest-service.md, "Static export to a CDN or object store".
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from superfluid.manifest.answers import render
from superfluid.manifest.choose import choose_routes
from superfluid.manifest.index import Index
from superfluid.manifest.routes import Page, ReleaseList, ReleaseOne, Route
from superfluid.runtime.kernel.errors import BadFile, UsageError

__all__ = ["export_routes", "export"]

_MARK = "v1/releases.json"  # what makes a directory an earlier export


def export_routes(index: Index) -> list[Route]:
    """Every route the export holds, in a stable order."""
    routes: list[Route] = [Page(), ReleaseList()]
    routes += [ReleaseOne(r.version) for r in index.releases]
    routes += choose_routes(index)
    return routes


def _file(route: Route) -> str:
    path = route.path.lstrip("/")
    assert ".." not in path.split("/") and not os.path.isabs(path)  # routes.version_usable() guarantees it
    return path


def _check_target(out: Path) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise UsageError(f"{out} is not a directory")
    if any(out.iterdir()) and not (out / _MARK).is_file():
        raise UsageError(f"{out} is neither empty nor an earlier export (no {_MARK}); an export replaces only "
                         f"its own: name a new or empty directory")


def export(index: Index, out: str | os.PathLike[str], *, sign: Callable[[Path, Path], list[Path]] | None = None
           ) -> list[Path]:
    """Write every answer of ``index`` under ``out``; the files written, relative to it.

    ``sign(stage, out)``, when given, adds to the staged tree before it replaces ``out`` (the TUF
    metadata, ``manifest.tuf_repository.sign_export``) and answers the files it wrote.

    Raises:
        UsageError: ``out`` holds something that is not an earlier export.
        BadFile: it cannot be written.
    """
    target = Path(out).resolve()
    _check_target(target)
    written = []
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            for route in export_routes(index):
                rel = _file(route)
                path = stage / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(render(index, route).data)
                written.append(Path(rel))
            if sign is not None:
                written += sign(stage, target)
            for d in [stage, *(p for p in stage.rglob("*") if p.is_dir())]:
                d.chmod(0o755)  # mkdtemp's 0700 would hide the export from a web server's user
            old = None
            if target.exists():
                old = target.with_name(f".{target.name}.old.{os.getpid()}")
                os.replace(target, old)
            os.replace(stage, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    except OSError as e:
        raise BadFile(str(e.filename or target), f"cannot be written ({e.strerror or e})") from None
    return written
