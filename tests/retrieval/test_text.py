"""MiniLM text vectors: a text's vector is a function of the text alone.

Before, a text's vector was made in a batch padded to its longest member, and its last bits moved
with its batch companions; a warm cache then gave other bits than a cold one (found by CI: the Ray
engine's caption-minilm run differed from the local one after the demo had filled the cache)."""

import random

import numpy as np
import pytest
from lookalike.io.cache import Cache
from lookalike.retrieval import encoders
from lookalike.retrieval.encoders import text

WORDS = ("revenue by segment quarterly report net income balance sheet key figures risk factors "
         "operating margin cash flow guidance outlook headcount").split()


def _texts(n: int, seed: int, lo: int = 1, hi: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


@pytest.fixture(scope="module")
def texts():
    # lengths across every shape class, one text past the 256-token limit, an empty one
    return _texts(34, 1) + _texts(1, 2, 250, 260) + [""]


@pytest.fixture(scope="module")
def alone(texts):
    return np.stack([text.embed([t])[0] for t in texts])


def test_a_vector_does_not_depend_on_its_batch_companions_or_position(texts, alone):
    np.testing.assert_array_equal(text.embed(texts), alone)
    rng = random.Random(3)
    for trial in range(4):
        picks = rng.sample(range(len(texts)), 14)
        others = _texts(9, 10 + trial)
        mixed = [texts[i] for i in picks] + others
        order = list(range(len(mixed)))
        rng.shuffle(order)
        got = text.embed([mixed[j] for j in order])
        back = np.empty_like(got)
        back[order] = got
        np.testing.assert_array_equal(back[:len(picks)], alone[picks])


def test_vectors_are_the_models_sentence_embeddings(texts, alone):
    """The fixed-shape passes compute what sentence-transformers' own encode computes (the padding
    is masked out), to float32 rounding; and every vector has unit length."""
    model = text.load_model("cpu")
    ref = model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    assert alone.shape == (len(texts), text.DIM) and alone.dtype == np.float32
    np.testing.assert_allclose(alone, ref, atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-6)
    assert text.embed([]).shape == (0, text.DIM)


def test_a_warm_cache_gives_a_cold_runs_bits(tmp_path, texts):
    """Whatever an earlier run embedded (other texts, in other companies), the vectors a run reads
    and makes are the bits a cold run makes."""
    cold = text.embed_cached(texts, Cache(tmp_path / "cold"), "k")
    warm = Cache(tmp_path / "warm")
    text.embed_cached(texts[5:30:2] + _texts(40, 7), warm, "k")          # an earlier run's batches
    text.embed_cached(texts[30:34], warm, "k")
    np.testing.assert_array_equal(text.embed_cached(texts, warm, "k"), cold)


def test_caption_encoder_on_a_half_warm_cache_matches_a_cold_one(tmp_path):
    import pandas as pd

    units = pd.DataFrame({"unit_id": [f"u{i}" for i in range(40)],
                          "filename": [f"page_{i}.png" for i in range(40)],
                          "alt_text": _texts(40, 8, 1, 12), "caption": _texts(40, 9, 0, 40)})
    enc = encoders.make_encoder("caption-minilm", progress=False)
    cold = enc.encode_units(units, tmp_path, Cache(tmp_path / "cold"))
    warm = Cache(tmp_path / "warm")
    enc.encode_units(units.iloc[::3], tmp_path, warm)
    assert enc.pending(units, tmp_path, warm) == [i for i in range(40) if i % 3]
    np.testing.assert_array_equal(enc.encode_units(units, tmp_path, warm).data, cold.data)
    # query vectors: the same text gives the same bits in any set of queries
    q = _texts(12, 11)
    full = enc.encode_queries(q, [f"q{i}" for i in range(12)]).data
    np.testing.assert_array_equal(enc.encode_queries(q[3:5], ["a", "b"]).data, full[3:5])


@pytest.mark.parametrize("name", ["caption-minilm", "ocr-minilm"])
def test_query_vectors_from_a_warm_cache_are_the_cold_bits_and_embed_nothing(tmp_path, monkeypatch, name):
    """The leak check asks for the same ablation queries in every run (and twice in one: clean and
    injected); with a cache, a warm call reads them and runs no model (before, every call embedded)."""
    enc = encoders.make_encoder(name, progress=False)
    q, ids = _texts(20, 12) + [""], [f"q{i}" for i in range(21)]
    plain = enc.encode_queries(q, ids).data
    cache = Cache(tmp_path / "c")
    cold = enc.encode_queries(q[:7], ids[:7], cache).data           # part of them first: a half-warm cache
    np.testing.assert_array_equal(cold, plain[:7])
    np.testing.assert_array_equal(enc.encode_queries(q, ids, cache).data, plain)
    monkeypatch.setattr(text, "embed", lambda *a, **k: pytest.fail("a warm cache embedded a query again"))
    warm = enc.encode_queries(q, ids, cache)
    np.testing.assert_array_equal(warm.data, plain)
    assert warm.ids == ids and warm.provenance == "query-text"
