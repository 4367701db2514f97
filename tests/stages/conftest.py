"""Fixtures the stage tests share, built once a session (tests read them and never change them)."""

import dataclasses
import importlib

import pytest

from lookalike import params, stages
from tests.conftest import REPO

from tests.stages.recording import record


@pytest.fixture(scope="session")
def recorded(tmp_path_factory):
    """Every section's recorded inputs and results from one small demo run (tests/stages/recording.py)."""
    return record(tmp_path_factory)


def _stage_results(run_dir):
    ctx = stages.context(run_dir, params.load_params(REPO / "params" / "ci.yaml"))
    out = {}
    for _notebook, module in stages.STAGES.items():
        res = importlib.import_module(f"lookalike.stages.{module}").run(ctx)
        res.save()
        out[module] = res
    return ctx, out


@pytest.fixture(scope="session")
def results(tmp_path_factory, worker_id):
    """Every stage called directly (no notebooks) on the ci configuration: (ctx, {module: StageResult}).
    Built once a session: on two workers the first to ask builds it under a file lock and pickles it, the
    other reads the pickle (about 35 s a build on 2 cores)."""
    if worker_id == "master":
        return _stage_results(tmp_path_factory.mktemp("stages") / "ci")
    import pickle

    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent
    done = shared / "stage_results.pickle"
    run_dir = shared / "stages" / "ci"
    with FileLock(str(shared / "stage_results.lock")):
        if not done.is_file():
            ctx, out = _stage_results(run_dir)
            # what a stage does after its files are saved has run (and is a closure pickle cannot take)
            done.write_bytes(pickle.dumps({m: dataclasses.replace(r, after_save=[]) for m, r in out.items()}))
            return ctx, out
    return stages.context(run_dir, params.load_params(REPO / "params" / "ci.yaml")), pickle.loads(done.read_bytes())
