"""The recording the stage tests share: every section's inputs and results from one small demo run
(ci size, the two cheapest encoders) through all eight stages, and the helpers that call a section
again on its recorded inputs (the fixture is ``recorded``, in tests/stages/conftest.py)."""

from __future__ import annotations

import copy
import importlib
import inspect

import pytest

from lookalike import params as P, stages
from tests.shapes import shape_corpora  # the shape lane's cheap settings and params writer

MODULES = {module: importlib.import_module(f"lookalike.stages.{module}") for module in stages.STAGES.values()}
SECTIONS = [(module, name) for module, mod in MODULES.items() for name, fn in inspect.getmembers(mod, inspect.isfunction)
            if name.endswith("_section") and fn.__module__ == mod.__name__]
# sections that add to the run's label store: called again in the same run folder they would find their
# own labels (0 added this time), so they are called again in a fresh folder
WRITES_STATE = {("judge_pool", "labels_section")}

# sections that write files when called, not when their stage is saved: none (labels_section appends to
# the label store, and is called in a fresh folder: WRITES_STATE)
WRITES_FILES: set = set()


def file_stamps(root) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def fresh_copy(value):
    try:
        return copy.deepcopy(value)
    except Exception:   # judges, caches, open stores: passed as they are
        return value


def record(tmp_path_factory):
    """Run the eight stages on the small demo while recording every section call: (ctx, calls, results)."""
    folder = tmp_path_factory.mktemp("sections")
    params = shape_corpora._params(folder, "sections", "corpus:\n  source: demo\n  demo_size: ci\n"
                                                      "encode:\n  encoders: [ocr-bm25, appearance]\n"
                                                      "mining:\n  retriever: ocr-bm25\n")
    ctx = stages.context(folder / "run", P.load_params(params))
    calls: dict[tuple[str, str], tuple] = {}
    mp = pytest.MonkeyPatch()
    for module, name in SECTIONS:
        fn = getattr(MODULES[module], name)

        def wrapped(*args, _fn=fn, _key=(module, name), **kwargs):
            inputs = (fresh_copy(args), fresh_copy(kwargs))
            out = _fn(*args, **kwargs)
            calls[_key] = (inputs, out)
            return out

        mp.setattr(MODULES[module], name, wrapped)
    results = {}
    try:
        for module in stages.STAGES.values():
            res = MODULES[module].run(ctx)
            res.save()
            results[module] = res
    finally:
        mp.undo()
    return ctx, calls, results


def call(recorded, module: str, name: str, **changed):
    """A section called on its recorded inputs, with the named arguments changed."""
    _, calls, _ = recorded
    (args, kwargs), _ = calls[(module, name)]
    fn = getattr(MODULES[module], name)
    bound = inspect.signature(fn).bind(*fresh_copy(args), **fresh_copy(kwargs))
    bound.arguments.update(changed)
    return fn(*bound.args, **bound.kwargs)


def recorded_input(recorded, module: str, name: str, arg: str):
    _, calls, _ = recorded
    (args, kwargs), _ = calls[(module, name)]
    return inspect.signature(getattr(MODULES[module], name)).bind(*args, **kwargs).arguments[arg]
