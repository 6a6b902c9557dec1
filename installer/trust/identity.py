"""Which GitHub Actions workflow an attestation must come from: a repository, a workflow file, a ref.

See docs/install.md, "Provenance".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The identity is a value apart from its check (``provenance``, which imports sigstore): a recipe, a lock,
# a compat document and the manifest service name one without paying for the verifier.
__all__ = ["Identity", "identity", "of_workflow_ref"]

_WORKFLOWS = ".github/workflows/"  # where GitHub Actions reads a repository's workflows
_REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True, slots=True)
class Identity:
    """The workflow a bundle must have been signed by: a GitHub repository (``OWNER/NAME``), and, when
    given, the workflow file in it (``.github/workflows/release.yml``) and the ref the run built
    (``refs/tags/b6000``; ``*`` matches any text: ``refs/tags/*`` is any tag)."""

    repository: str
    workflow: str | None = None
    ref: str | None = None

    def __str__(self) -> str:
        where = self.repository + (f" {self.workflow}" if self.workflow else "")
        return where + (f" at {self.ref}" if self.ref else "")

    def to_json(self) -> dict[str, Any]:
        return {"repository": self.repository, "workflow": self.workflow, "ref": self.ref}

    @classmethod
    def from_json(cls, doc: Any) -> Identity:
        """The identity ``to_json`` wrote, checked as ``identity`` checks it.

        Raises:
            ValueError: not an object of ``repository`` (a string) and ``workflow``, ``ref`` (strings
                or null), or a value ``identity`` refuses; the message says which.
        """
        if not isinstance(doc, Mapping) or not isinstance(doc.get("repository"), str):
            raise ValueError("an identity is an object with repository (OWNER/NAME), workflow and ref")
        workflow, ref = doc.get("workflow"), doc.get("ref")
        if not isinstance(workflow, str | None) or not isinstance(ref, str | None):
            raise ValueError("an identity's workflow and ref are strings or null")
        return identity(doc["repository"], workflow, ref)


def identity(repository: str, workflow: str | None = None, ref: str | None = None) -> Identity:
    """The ``Identity`` asked, checked for its shape: a bare workflow file name (``release.yml``) is one
    under ``.github/workflows/``.

    Raises:
        ValueError: a repository that is not ``OWNER/NAME``, a workflow that is absolute, holds ``@`` or
            ``..``, or an empty ref; the message says which.
    """
    if not _REPOSITORY.match(repository):
        raise ValueError(f"repository {repository!r} is not OWNER/NAME")
    if workflow is not None:
        if not workflow or workflow.startswith("/") or "@" in workflow or ".." in workflow.split("/"):
            raise ValueError(f"workflow {workflow!r} is not a path in the repository (.github/workflows/FILE)")
        if "/" not in workflow:
            workflow = f"{_WORKFLOWS}{workflow}"
    if ref is not None and not ref.strip():
        raise ValueError("ref is empty (give refs/tags/NAME, refs/heads/NAME or a pattern: refs/tags/*)")
    return Identity(repository, workflow, ref)


def of_workflow_ref(workflow_ref: str) -> Identity:
    """The identity of the run GitHub Actions names in ``GITHUB_WORKFLOW_REF``
    (``OWNER/NAME/.github/workflows/release.yml@refs/tags/v1.0``): what the certificate of an attestation
    that run makes states (its build signer URI is ``https://github.com/`` and this), for a workflow
    that is not a reusable one called from another repository.

    >>> of_workflow_ref("o/r/.github/workflows/release.yml@refs/tags/v1.0")
    Identity(repository='o/r', workflow='.github/workflows/release.yml', ref='refs/tags/v1.0')

    Raises:
        ValueError: not of that form, or a part ``identity`` refuses.
    """
    path, at, ref = workflow_ref.rpartition("@")
    parts = path.split("/", 2)
    if not at or len(parts) != 3 or not parts[2].startswith(_WORKFLOWS):
        raise ValueError(f"GITHUB_WORKFLOW_REF {workflow_ref!r} is not OWNER/NAME/{_WORKFLOWS}FILE@REF")
    return identity(f"{parts[0]}/{parts[1]}", parts[2], ref)
