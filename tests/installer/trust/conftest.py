"""Fixtures of the trust tests: ``sigstore``, a Sigstore made in memory (tests/installer/trust/
sigstore_simulator.py) whose bundles the provenance tests verify."""

from __future__ import annotations

import pytest

from tests.installer.trust.sigstore_simulator import SigstoreSimulator


@pytest.fixture(scope="module")
def sigstore() -> SigstoreSimulator:
    """A CA, a CT log and a transparency log, with the trusted root naming them (one per test module)."""
    return SigstoreSimulator()
