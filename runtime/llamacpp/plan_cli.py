"""The worker's ``plan``: which llama.cpp archives would install here, as the ordered plans (SPEC §6.5).

``plan [--version V] [--backend B] [--from URL|PATH] [--sha256 H] [--untested]`` answers one line of
JSON, ``{"host", "describe", "plans"}`` (notes/superfluid-contract.md §2.2), from the recipe, the
detected host (``SUPERFLUID_HOST_*`` overrides apply) and the request, through ``planner.plan``.

The worker never touches the network. A tested build is planned from the recipe alone; an untested
build's archives are known only from the release listing, which the installer reads: ``plan`` with
``--untested`` and no ``--from`` is refused with that said (``--from`` names the archive, so it needs
no listing).

Without ``--version`` and ``--from``, the planner falls back to older tested builds after the
newest one's plans (``planner.plan``), as the installer does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.runtime.plan_request import PlanRequest, parse_plan_request, plans_json

__all__ = ["plan_answer"]


def _plans(want: PlanRequest, recipe: Mapping[str, Any], host: Any) -> list[dict[str, Any]]:
    """The ordered plans (the planner's, with its fallback to older tested builds).

    Raises:
        PlanRefused: the planner's refusal, or an untested build that needs the release listing.
    """
    from superfluid.runtime.llamacpp.planner import PlanRefused, plan
    from superfluid.runtime.llamacpp.recipe import tested

    builds = [b.version for b in tested(dict(recipe))]
    if not want.from_ and want.version and want.version not in builds and want.untested:
        raise PlanRefused(
            f"llama.cpp {want.version} is not a tested build, so its archives are known only from the release "
            f"listing, and this worker never touches the network: `superfluid runtime install llamacpp "
            f"--version {want.version} --untested` resolves it (or name its archive with --from)")
    return plan(want, recipe, host)


def plan_answer(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any]:
    """``plan <argv...>``: ``{"host", "describe", "plans"}`` for the detected host.

    Raises:
        UsageError: a bad flag (see ``runtime.plan_request.parse_plan_request``).
        PlanRefused: nothing of the request installs here, or an untested build without
            ``--untested``, or one that needs the release listing.
        BadFile: the recipe is broken.
    """
    from superfluid.runtime.host import detect
    from superfluid.runtime.llamacpp.recipe import load

    want = parse_plan_request(argv)
    host = detect(environ)
    return plans_json(host, _plans(want, load(), host))
