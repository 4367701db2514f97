"""Reranking (/v1/rerank endpoint, a tiny random CrossEncoder, MaxSim re-scoring) and query
splitting (a chat endpoint), against local servers the tests start."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from lookalike.retrieval import rerank

from tests.fake_services import Services

BASE = pd.DataFrame({"query_id": ["q1"] * 4 + ["q2"] * 3,
                     "unit_id": ["a", "b", "c", "d", "a", "b", "c"],
                     "score": [4.0, 3.0, 2.0, 1.0, 3.0, 2.0, 1.0]})


def test_rerank_run_reorders_the_top_depth_keeps_the_rest_and_breaks_ties_by_the_base_order():
    flip = {"q1": {"a": 0.1, "b": 0.9, "c": 0.5}, "q2": {"a": 0.2, "b": 0.2}}
    res = rerank.rerank_run(BASE, depth=3, score=lambda q, us: np.array([flip[q][u] for u in us]) if q == "q1"
                       else np.array([flip[q].get(u, 0.0) for u in us]))
    order = {q: list(g.sort_values("score", ascending=False)["unit_id"]) for q, g in res.run.groupby("query_id")}
    assert order["q1"] == ["b", "c", "a", "d"]          # top 3 reranked, d (rank 4) stays below
    assert order["q2"] == ["a", "b", "c"]               # tie between a and b: the base order; c scored 0
    assert res.failed == []
    assert list(res.scores[res.scores["query_id"] == "q1"]["unit_id"]) == ["b", "c", "a"]


def test_a_question_the_reranker_refuses_keeps_its_base_order_and_is_listed():
    def score(q, us):
        if q == "q2":
            raise rerank.RerankError("document too long")
        return np.arange(len(us), dtype=float)          # reverses q1's top 3
    res = rerank.rerank_run(BASE, depth=3, score=score)
    q2 = res.run[res.run["query_id"] == "q2"].sort_values("score", ascending=False)
    assert list(q2["unit_id"]) == ["a", "b", "c"] and res.failed == [("q2", "document too long")]
    with pytest.raises(rerank.RerankUnavailable):
        rerank.rerank_run(BASE, 3, lambda q, us: (_ for _ in ()).throw(rerank.RerankUnavailable("down")))


def test_endpoint_reranker_speaks_the_shared_rerank_shape_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("RERANK_KEY_FOR_TEST", "sekret")
    with Services() as server:
        rr = rerank.EndpointReranker(server.url, "toy-rerank", "RERANK_KEY_FOR_TEST", backoff_s=0.01, cache_dir=tmp_path)
        s = rr.score("revenue by region", ["headcount table", "revenue by region table", "region map"])
        assert int(np.argmax(s)) == 1
        path, body, headers = server.requests[0]
        assert path == "/v1/rerank" and body["model"] == "toy-rerank" and body["top_n"] == 3
        assert body["documents"][1] == "revenue by region table" and headers["Authorization"] == "Bearer sekret"
        again = rerank.EndpointReranker(server.url, "toy-rerank", "RERANK_KEY_FOR_TEST", cache_dir=tmp_path)
        np.testing.assert_array_equal(again.score("revenue by region", ["headcount table", "revenue by region table",
                                                                      "region map"]), s)
        assert len(server.requests) == 1                    # the second came from the cache
    assert "sekret" not in "".join(p.read_text() for p in (tmp_path / "rerank").glob("*.json"))


def test_endpoint_reranker_names_a_malformed_reply_and_a_server_that_is_down(tmp_path):
    with Services({"/rerank": lambda b: (200, {"results": [{"index": 7, "relevance_score": 1.0}]})}) as server:
        with pytest.raises(rerank.RerankError, match="malformed"):
            rerank.EndpointReranker(server.url, "m", backoff_s=0.01).score("q", ["a", "b"])
    with Services({"/rerank": lambda b: (200, {"results": [{"index": 0, "relevance_score": 1.0}]})}) as server:
        with pytest.raises(rerank.RerankError, match="scored 1 of 2"):
            rerank.EndpointReranker(server.url, "m", backoff_s=0.01).score("q", ["a", "b"])
    with Services(down=True) as server:
        with pytest.raises(rerank.RerankUnavailable, match="no reply after 3 attempts"):
            rerank.EndpointReranker(server.url, "m", retries=2, backoff_s=0.01).score("q", ["a"])
        assert len(server.requests) == 3


@pytest.mark.slow
def test_a_tiny_random_cross_encoder_reranks_offline(tmp_path):
    from tests import tiny_colpali
    import torch
    import transformers as tf

    torch.manual_seed(0)
    tok = tiny_colpali._tokenizer([])
    cfg = tf.BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=128, num_labels=1)
    tf.BertForSequenceClassification(cfg).eval().save_pretrained(tmp_path / "ce")
    tok.save_pretrained(tmp_path / "ce")
    rr = rerank.CrossEncoderReranker(str(tmp_path / "ce"), cache_dir=tmp_path / "cache")
    docs = ["revenue by segment", "quarter", "segment"]
    s = rr.score("revenue by segment quarter", docs)
    assert s.shape == (3,) and np.isfinite(s).all()
    from sentence_transformers import CrossEncoder

    direct = CrossEncoder(str(tmp_path / "ce"), device="cpu").predict([("revenue by segment quarter", d) for d in docs])
    np.testing.assert_allclose(s, np.asarray(direct, dtype=float).reshape(3), atol=1e-6)
    assert rr.id.startswith("rerank-cross-encoder:") and len(list((tmp_path / "cache" / "rerank").glob("*.json"))) == 1


def test_maxsim_reranker_rescores_with_the_multi_vector_model():
    rng = np.random.default_rng(0)
    pages = {u: rng.standard_normal((5, 8)).astype(np.float32) for u in "abcd"}
    q = pages["c"][:2] + 0.01
    rr = rerank.MaxSimReranker("toy-multi", pages, {"q1": q})
    s = rr.score_ids("q1", ["a", "b", "c"])
    assert int(np.argmax(s)) == 2
    res = rerank.rerank_run(BASE[BASE["query_id"] == "q1"], 3, rr.score_ids)
    assert res.run.sort_values("score", ascending=False)["unit_id"].iloc[0] == "c"
    with pytest.raises(rerank.RerankError, match="no vectors"):
        rr.score_ids("q9", ["a"])


