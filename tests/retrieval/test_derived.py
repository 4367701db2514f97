"""Stage 07's derived systems (retrieval.derived): built from the parameters or skipped with the reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
from lookalike.io.cache import Cache
from lookalike.retrieval import derived
from lookalike.retrieval.encoders.base import Vectors
from lookalike.stages.base import context
from tests.retrieval.test_rerank import BASE


def _ctx(tmp_path, **sections):
    return context(tmp_path, sections)


def test_derived_systems_are_built_from_parameters_or_skipped_with_the_reason(tmp_path):
    units = pd.DataFrame({"unit_id": ["a", "b", "c", "d"], "image_path": ["a.png"] * 4})
    questions = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["x", "y"]})
    vecs = {"toy": Vectors("toy", "pixels", list("abcd"), np.eye(4, dtype=np.float32))}
    cache = Cache(tmp_path / "cache")
    plain = _ctx(tmp_path).config
    none = derived.build({"toy": BASE}, questions, vecs, units, tmp_path, cache, plain.rerank, plain.split, plain.encode, {}, 100)
    assert none.runs == {} and none.notes == []
    asked = _ctx(tmp_path, rerank={"systems": ["toy", "nope"]}, split={"systems": ["toy"]})
    cfg = asked.config
    out = derived.build({"toy": BASE}, questions, vecs, units, tmp_path, cache, cfg.rerank, cfg.split, cfg.encode, {}, 100)
    assert out.runs == {}
    said = "\n".join(out.notes)
    assert "'nope' is not a system of this run" in said
    assert "toy+rerank not built: the endpoint reranker needs rerank.url" in said
    assert "toy+split not built: query splitting needs split.url" in said
