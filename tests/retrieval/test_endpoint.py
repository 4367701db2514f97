"""The OpenAI-compatible embeddings encoder against a local HTTP server the test starts
(no real model server can be reached from here)."""

import hashlib
import time

import numpy as np
import pandas as pd
from lookalike.stages.base import context
import pytest

from lookalike.io.cache import Cache
from lookalike.retrieval import encoders
from lookalike.retrieval import systems
from lookalike.retrieval.encoders.endpoint import EndpointUnavailable

from tests.conftest import make_png
from tests.fake_services import Services


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [b / 255.0 for b in digest[:8]]


class FakeServer(Services):
    """POST /v1/embeddings. mode: ok | malformed | slow-first | bad-item | down. calls: the request
    bodies; headers: their headers."""

    def __init__(self, mode="ok", delay=0.0):
        self.mode, self.delay = mode, delay
        super().__init__({"/embeddings": self._embeddings}, down=mode == "down")

    @property
    def bodies(self):
        return [body for _, body, _ in self.requests]

    def _embeddings(self, body):
        if self.mode == "slow-first" and len(self.requests) == 1:
            time.sleep(self.delay)
        if self.mode == "malformed":
            return 200, {"data": "not a list"}
        if "messages" in body:
            url = body["messages"][0]["content"][0]["image_url"]["url"]
            return 200, {"data": [{"index": 0, "embedding": _vector(url[-40:])}]}
        inputs = body["input"]
        if self.mode == "bad-item" and "BAD" in inputs:
            return 400, {"error": "input 'BAD' is not allowed"}
        return 200, {"data": [{"index": i, "embedding": _vector(t)} for i, t in enumerate(inputs)]}


def _encoder(server, **kw):
    return encoders.make_encoder("endpoint", url=server.url, model="toy-embed", backoff_s=0.01, **kw)


def test_texts_are_batched_cached_and_the_key_is_sent_but_never_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_KEY", "sk-secret-123")
    cache = Cache(tmp_path / "cache")
    with FakeServer() as server:
        enc = _encoder(server, api_key_env="TOY_KEY", batch_size=2)
        v = enc.encode_texts(["alpha", "beta", "gamma"], ["a", "b", "c"], "caption-text", cache)
        assert v.ids == ["a", "b", "c"] and np.allclose(v.data[1], _vector("beta"))
        assert [c["input"] for c in server.bodies] == [["alpha", "beta"], ["gamma"]]
        assert all(h["Authorization"] == "Bearer sk-secret-123" for h in [h for _, _, h in server.requests])
        again = _encoder(server, api_key_env="TOY_KEY").encode_texts(["gamma", "alpha"], ["c", "a"], "caption-text",
                                                                     cache)
        assert len(server.bodies) == 2 and again.stats["cached"] == 2       # nothing sent twice
    stored = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert b"sk-secret-123" not in stored and "sk-secret-123" not in enc.id


def test_page_images_go_one_per_request_as_data_urls(tmp_path):
    make_png(tmp_path / "p1.png", color=(200, 30, 30))
    make_png(tmp_path / "p2.png", color=(30, 30, 200))
    units = pd.DataFrame({"unit_id": ["u1", "u2"], "image_path": ["p1.png", "p2.png"]})
    with FakeServer() as server:
        v = _encoder(server, image_prompt="Represent this page.").encode_units(units, tmp_path, Cache(tmp_path / "c"))
    assert v.ids == ["u1", "u2"] and v.provenance == "pixels" and v.data.shape == (2, 8)
    assert len(server.bodies) == 2 and not np.allclose(v.data[0], v.data[1])
    first = server.bodies[0]["messages"][0]["content"]
    assert first[0]["image_url"]["url"].startswith("data:image/png;base64,") and first[1]["text"] == "Represent this page."


def test_a_malformed_reply_is_reported_per_item_and_nothing_is_invented(tmp_path):
    with FakeServer("malformed") as server:
        v = _encoder(server).encode_texts(["one", "two"], ["q1", "q2"], "query-text", Cache(tmp_path))
    assert v.ids == [] and [f[0] for f in v.stats["failed"]] == ["q1", "q2"]
    assert "expected 'data' with 1 embeddings" in v.stats["failed"][0][1]


def test_a_timeout_is_retried_and_then_succeeds(tmp_path):
    with FakeServer("slow-first", delay=1.5) as server:
        v = _encoder(server, timeout_s=0.5).encode_texts(["late"], ["q"], "query-text", Cache(tmp_path))
    assert v.ids == ["q"] and len(server.bodies) >= 2


def test_one_failing_item_in_a_batch_is_isolated_and_the_rest_kept(tmp_path):
    with FakeServer("bad-item") as server:
        v = _encoder(server, batch_size=8).encode_texts(["ok one", "BAD", "ok two", "ok three"],
                                                        ["a", "b", "c", "d"], "caption-text", Cache(tmp_path))
    assert v.ids == ["a", "c", "d"] and np.allclose(v.data[2], _vector("ok three"))
    assert v.stats["failed"][0][0] == "b" and "HTTP 400" in v.stats["failed"][0][1]


def test_a_server_that_stays_down_stops_the_pass_with_the_url_and_the_attempts(tmp_path):
    with FakeServer("down") as server:
        with pytest.raises(EndpointUnavailable, match=r"no reply after 3 attempts: HTTP 503"):
            _encoder(server, retries=2).encode_texts(["x"], ["q"], "query-text", Cache(tmp_path))
        assert len(server.bodies) == 3


def test_the_endpoint_encoder_needs_a_url_and_a_model():
    with pytest.raises(encoders.EncodeError, match="needs a url"):
        encoders.make_encoder("endpoint")


def test_every_registry_entry_declares_what_it_reads():
    # the lazy entries (colpali, endpoint) must declare a provenance like the classes, or indexing
    # such a system fails in systems.declared_provenance
    for name in encoders.ENCODERS:
        assert systems.declared_provenance(name) in ("pixels", "caption-text")


def test_an_endpoint_system_is_built_from_run_parameters_and_ranks_queries(tmp_path):
    make_png(tmp_path / "p1.png", color=(200, 30, 30))
    make_png(tmp_path / "p2.png", color=(30, 30, 200))
    units = pd.DataFrame({"unit_id": ["u1", "u2"], "image_path": ["p1.png", "p2.png"]})
    questions = pd.DataFrame({"query_id": ["q1"], "text": ["which page is blue?"]})
    with FakeServer() as server:
        ctx = context(tmp_path, {"encode": {"batch_size": 8, "workers": 1, "endpoint_url": server.url,
                                            "endpoint_model": "toy-embed", "endpoint_api_key_env": "NO_SUCH_KEY"}})
        settings = ctx.encoder_settings()
        unit_vectors, table, _ = systems.encode_units(units, tmp_path, ["endpoint"], Cache(tmp_path / "c"), **settings)
        query_vectors = systems.encode_queries(questions, ["endpoint"], run_dir=tmp_path, **settings)
    assert table["encoder_id"].iloc[0].startswith("endpoint@") and server.url in table["encoder_id"].iloc[0]
    runs = systems.build_runs(unit_vectors, query_vectors, depth=10)
    assert sorted(runs["endpoint"]["unit_id"]) == ["u1", "u2"]
    unit_vectors["endpoint"].save(tmp_path / "vectors", "endpoint")
    assert systems.base_systems(tmp_path, ["ocr-bm25", "endpoint", "appearance"]) == ["endpoint"]
