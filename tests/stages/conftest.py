"""Fixtures the stage tests share, built once a session (tests read them and never change them); the
stages called directly on the ci configuration (``results``) sit in tests/conftest.py."""

import pytest

from tests.stages.recording import record


@pytest.fixture(scope="session")
def recorded(tmp_path_factory):
    """Every section's recorded inputs and results from one small demo run (tests/stages/recording.py)."""
    return record(tmp_path_factory)
