"""Installs made by hand for the store's and publish's tests: a receipt, a stage that fills ``lib/``,
and one call of ``install_staged`` (runtime id ``demo``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from superfluid.installer.home import installs
from superfluid.installer.home.installs import list_installs, runtime_root
from superfluid.installer.home.publish import install_staged
from superfluid.runtime.kernel.layout import worker_path
from superfluid.runtime.kernel.receipt import Receipt, Source

RID = "demo"


def receipt(name: str, tag: str = "", **kw: object) -> Receipt:
    version, backend = name.split("-", 1)
    fields: dict[str, object] = dict(id=RID, install=name, version=version, backend=backend,
                                     worker=worker_path(RID), sources=(Source(f"file:///{tag or name}", "0" * 64),),
                                     tested=True, chosen_by="tested")
    fields.update(kw)
    return Receipt(**fields)  # type: ignore[arg-type]


def populating(install: str, tag: str = "", files: int = 5) -> Callable[[Path], Receipt]:
    def populate(staging: Path) -> Receipt:
        for i in range(files):
            (staging / "lib" / f"part{i}").write_text(tag or install)
        return receipt(install, tag)
    return populate


def no_probe(staging: Path) -> None:
    pass


def do_install(home: Path, install: str, tag: str = "", **kw: object) -> installs.Installed:
    install_staged(home, RID, install, populating(install, tag), no_probe, **kw)  # type: ignore[arg-type]
    return next(i for i in list_installs(runtime_root(home, RID)) if i.name == install)


def root_of(home: Path) -> Path:
    return runtime_root(home, RID)


def leftovers(home: Path) -> list[str]:
    return sorted(n for n in os.listdir(root_of(home)) if n.startswith(".") and n != ".install.lock")
