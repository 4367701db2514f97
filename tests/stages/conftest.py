"""Fixtures the stage tests share, built once a session (tests read them and never change them)."""

import importlib

import pytest

from lookalike import params, stages
from tests.conftest import REPO

from tests.stages.recording import record


@pytest.fixture(scope="session")
def recorded(tmp_path_factory):
    """Every section's recorded inputs and results from one small demo run (tests/stages/recording.py)."""
    return record(tmp_path_factory)


@pytest.fixture(scope="session")
def results(tmp_path_factory):
    """Every stage called directly (no notebooks) on the ci configuration: (ctx, {module: StageResult})."""
    run_dir = tmp_path_factory.mktemp("stages") / "ci"
    ctx = stages.context(run_dir, params.load_params(REPO / "params" / "ci.yaml"))
    out = {}
    for _notebook, module in stages.STAGES.items():
        res = importlib.import_module(f"lookalike.stages.{module}").run(ctx)
        res.save()
        out[module] = res
    return ctx, out
