"""``-v``: the installer's own log on stderr, as ``superfluid: <line>`` (docs/cli.md, "Quiet and
verbose")."""

from __future__ import annotations

import logging
import sys

# Each request, redirect, retry, resume and cache decision the installer logs (``logging``, under the
# ``superfluid`` logger). The face loads this module only when a line asks ``-v``: ``logging`` costs a
# plain start about 10 ms.

__all__ = ["log_each_step"]


def log_each_step() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("superfluid: %(message)s"))
    logger = logging.getLogger("superfluid")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
