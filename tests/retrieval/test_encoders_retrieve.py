"""Encoders, cache, indexes, MaxSim, fusion and document-context scoring."""


import numpy as np
import pandas as pd
import pytest
import torch
from lookalike.io.cache import Cache
from lookalike.retrieval import encoders
from lookalike.retrieval import clustering
from lookalike.retrieval import doc_context, fusion
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval.encoders import ocr
from lookalike.retrieval.encoders.base import Vectors


@pytest.fixture(scope="module")
def demo_units(tmp_path_factory):
    from lookalike.data import demo

    out = tmp_path_factory.mktemp("run")
    corpus = demo.generate("ci", 7, out / "corpus")
    return corpus.units, out


@pytest.mark.skipif(not ocr.tesseract_available(), reason="tesseract-ocr not installed (make setup installs it)")
def test_ocr_reads_the_title_of_a_demo_page(demo_units, tmp_path):
    units, base = demo_units
    picks = units[units["template_id"].isin(["segment_bar", "kpi_table", "risk_factors"])].groupby("template_id").head(1)
    texts, stats = ocr.ocr_many([str(base / p) for p in picks["image_path"]], "tesseract", Cache(tmp_path), 1, False)
    by_template = dict(zip(picks["template_id"], texts))
    assert "by segment" in by_template["segment_bar"]          # e.g. "Revenue by segment"
    assert "Key figures" in by_template["kpi_table"]            # white text on a coloured title band
    assert "Risk factors" in by_template["risk_factors"]
    assert stats["computed"] == 3


@pytest.mark.skipif(not ocr.tesseract_available(), reason="tesseract-ocr not installed (make setup installs it)")
def test_ocr_workers_are_spawned_not_forked_and_read_what_one_process_reads(demo_units, tmp_path, monkeypatch):
    # a forked worker of a threaded stage kernel can deadlock on a lock copied mid-use; the pool must spawn
    units, base = demo_units
    paths = [str(base / p) for p in units["image_path"].head(3)]
    contexts = []
    real_pool = ocr.ProcessPoolExecutor

    def recording_pool(*args, **kwargs):
        contexts.append(kwargs.get("mp_context"))
        return real_pool(*args, **kwargs)

    monkeypatch.setattr(ocr, "ProcessPoolExecutor", recording_pool)
    pooled, stats = ocr.ocr_many(paths, "tesseract", Cache(tmp_path / "pooled"), 2, False)
    assert stats["computed"] == 3
    assert [c.get_start_method() if c else None for c in contexts] == ["spawn"]
    assert pooled == [ocr.ocr_image(p, "tesseract") for p in paths]


def test_cache_hit_miss_and_corruption(tmp_path, demo_units):
    units, base = demo_units
    cache = Cache(tmp_path / "cache")
    enc = encoders.make_encoder("appearance", progress=False)
    sub = units.head(3)
    first = enc.encode_units(sub, base, cache)
    assert first.stats["computed"] == 3
    again = enc.encode_units(sub, base, cache)
    assert again.stats == {**again.stats, "computed": 0, "cached": 3}
    np.testing.assert_array_equal(first.data, again.data)
    # truncate one entry and flip a byte in another: both are detected and recomputed
    files = sorted((tmp_path / "cache").rglob("*.npy"))
    files[0].write_bytes(files[0].read_bytes()[:20])
    blob = bytearray(files[1].read_bytes())
    blob[40] ^= 0xFF
    files[1].write_bytes(bytes(blob))
    third = enc.encode_units(sub, base, cache)
    assert third.stats["computed"] == 2 and cache.corrupt == 2
    np.testing.assert_array_equal(first.data, third.data)


def test_cache_keys_change_with_encoder_settings(tmp_path):
    cache = Cache(tmp_path)
    cache.put_text("ab" * 32, "ocr:engine-a", "old text")
    assert cache.get_text("ab" * 32, "ocr:engine-a") == "old text"
    assert cache.get_text("ab" * 32, "ocr:engine-b") is None
    a = encoders.make_encoder("ocr-minilm", ocr_engine="rapidocr", progress=False)
    b = encoders.make_encoder("ocr-minilm", ocr_engine="tesseract", progress=False)
    assert a.id != b.id


def test_cache_keys_hold_the_device_class_and_precision():
    cpu = encoders.make_encoder("ocr-minilm", progress=False)
    gpu0 = encoders.make_encoder("ocr-minilm", progress=False)
    gpu0.device, gpu0.dtype = "cuda:0", "bfloat16"          # as resolve_device gives them on a GPU machine
    gpu1 = encoders.make_encoder("ocr-minilm", progress=False)
    gpu1.device, gpu1.dtype = "cuda:1", "bfloat16"
    assert cpu.id.endswith("|cpu/float32") and gpu0.id.endswith("|cuda/bfloat16")
    assert cpu.id != gpu0.id and gpu0.id == gpu1.id         # another GPU of the same class shares entries


def test_provenance_guard_refuses_caption_vectors_in_a_pixels_index():
    caption = Vectors("caption-minilm", "caption-text", ["u1"], np.ones((1, 4), np.float32))
    with pytest.raises(retrieve.ProvenanceError, match="accepts \\['pixels'\\] vectors only; got 'caption-text'"):
        retrieve.DenseIndex(accepts=("pixels",), name="image").add(caption)
    with pytest.raises(retrieve.ProvenanceError):
        retrieve.BM25Index(accepts=("pixels",)).add(Vectors("c", "caption-text", ["u1"], ["text"], "text"))
    with pytest.raises(retrieve.ProvenanceError):
        retrieve.MultiVectorIndex(accepts=("pixels",)).add(
            Vectors("c", "metadata", ["u1"], [np.ones((2, 4), np.float32)], "multi"))
    # only an explicit override lets it through, and the index records it
    index = retrieve.DenseIndex(accepts=("pixels",), allow_foreign_provenance=True).add(caption)
    assert index.allow_foreign_provenance and index.unit_ids == ["u1"]


def test_dense_search_is_exact_and_ties_are_canonical():
    units = Vectors("e", "pixels", ["a", "b", "c", "d"],
                    np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], dtype=np.float32))
    queries = Vectors("e", "query-text", ["q"], np.array([[1, 0]], dtype=np.float32))
    run = retrieve.DenseIndex().add(units).search(queries, k=3)
    assert list(run["unit_id"]) == ["c", "a", "d"]          # a and c tie: unit id descending first
    assert run["score"].tolist() == pytest.approx([1.0, 1.0, 0.6])


def _random_multi(rng, n, lo, hi, dim):
    return [rng.standard_normal((int(rng.integers(lo, hi)), dim)).astype(np.float32) for _ in range(n)]


def _colpali_scores(qs, ps, batch_size=4):
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

    return BaseVisualRetrieverProcessor.score_multi_vector([torch.from_numpy(q) for q in qs],
                                                           [torch.from_numpy(p) for p in ps],
                                                           batch_size=batch_size).float().numpy()


def test_maxsim_equals_colpali_engine_scorer():
    rng = np.random.default_rng(0)
    qs = _random_multi(rng, 7, 3, 12, 32)
    ps = [rng.standard_normal((30, 32)).astype(np.float32) for _ in range(23)]
    ours = retrieve.maxsim(qs, ps, memory_budget_mb=0.01)          # tiny budget: many blocks
    assert np.abs(ours - _colpali_scores(qs, ps)).max() < 1e-4


def test_maxsim_masks_page_padding_where_colpali_engine_does_not():
    # colpali-engine pads shorter pages with zero vectors and takes the max over the padding too, so
    # a query token whose every similarity with a short page is negative scores 0 there instead of
    # its true (negative) maximum. Real ColPali embeddings are normalised and such tokens are rare;
    # lookalike masks the padding. With non-negative vectors the two agree on ragged pages exactly.
    rng = np.random.default_rng(1)
    qs = [np.abs(q) for q in _random_multi(rng, 5, 3, 12, 16)]
    ps = [np.abs(p) for p in _random_multi(rng, 17, 2, 40, 16)]
    assert np.abs(retrieve.maxsim(qs, ps, 0.01) - _colpali_scores(qs, ps)).max() < 1e-4
    signed_q = _random_multi(rng, 5, 3, 12, 16)
    signed_p = _random_multi(rng, 17, 2, 40, 16)
    ours = retrieve.maxsim(signed_q, signed_p)
    theirs = _colpali_scores(signed_q, signed_p)
    assert (theirs >= ours - 1e-4).all()               # padding can only raise colpali-engine's score
    exact = np.array([[sum(max(float(t @ v) for v in p) for t in q) for p in signed_p] for q in signed_q])
    assert np.abs(ours - exact).max() < 1e-4


def _run(pairs):
    return pd.DataFrame(pairs, columns=["query_id", "unit_id", "score"])


def test_rrf_of_one_list_keeps_its_order():
    run = _run([("q", "a", 0.2), ("q", "b", 0.9), ("q", "c", 0.5), ("r", "x", 1.0)])
    fused = fusion.rrf([run])
    assert list(fused[fused["query_id"] == "q"]["unit_id"]) == ["b", "c", "a"]


def test_rrf_sums_reciprocal_ranks():
    a = _run([("q", "u1", 3.0), ("q", "u2", 2.0)])
    b = _run([("q", "u2", 5.0), ("q", "u3", 1.0)])
    fused = fusion.rrf([a, b], k=60).set_index("unit_id")["score"]
    assert fused["u2"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["u1"] == pytest.approx(1 / 61) and fused["u3"] == pytest.approx(1 / 62)


def test_round_robin_interleaves_without_duplicates():
    a = _run([("q", "u1", 3.0), ("q", "u2", 2.0), ("q", "u3", 1.0)])
    b = _run([("q", "u2", 3.0), ("q", "u4", 2.0), ("q", "u1", 1.0)])
    fused = fusion.round_robin([a, b])
    order = list(fused.sort_values("score", ascending=False)["unit_id"])
    assert order == ["u1", "u2", "u4", "u3"]
    assert len(order) == len(set(order))


def test_score_sum_normalisation():
    a = _run([("q", "u1", 10.0), ("q", "u2", 0.0)])
    b = _run([("q", "u2", 1.0), ("q", "u1", 0.5), ("q", "u3", 0.0)])
    mm = fusion.score_sum([a, b], "minmax").set_index("unit_id")["score"]
    assert mm["u1"] == pytest.approx(1.5) and mm["u2"] == pytest.approx(1.0) and mm["u3"] == 0.0
    z = fusion.normalise_scores(b, "zscore")
    assert z["score"].mean() == pytest.approx(0.0) and z["score"].std(ddof=0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown normalisation"):
        fusion.normalise_scores(a, "rank")


def test_document_context_lifts_pages_of_the_right_document():
    # Two documents; the query's tokens match doc A's context, and pages p2 (doc A) and p3 (doc B)
    # are equally good on their own. Document context must put p2 first.
    e = np.eye(4, dtype=np.float32)
    pages = [np.stack([e[0], e[1]]), np.stack([e[2]]), np.stack([e[2], e[3]])]   # p1, p2 in A; p3 in B
    docs = ["A", "A", "B"]
    query = [np.stack([e[0], e[2]])]
    plain = retrieve.maxsim(query, pages)
    assert plain[0, 1] == plain[0, 2]
    ctx = doc_context.document_context_scores(query, pages, docs, n_context=2, seed=0)
    assert ctx[0, 1] > ctx[0, 2]
    added = ctx - plain                                   # the document term: same for pages of one document
    assert added[0, 0] == pytest.approx(added[0, 1]) and added[0, 1] > added[0, 2]


def test_spherical_kmeans_returns_unit_centroids():
    rng = np.random.default_rng(1)
    x = np.r_[rng.normal([5, 0], 0.1, (20, 2)), rng.normal([0, 5], 0.1, (20, 2))]
    c = clustering.spherical_kmeans(x, 2, np.random.default_rng(0))
    assert np.allclose(np.linalg.norm(c, axis=1), 1.0)
    assert sorted(np.round(np.abs(c).max(axis=1), 2)) == [1.0, 1.0]


def test_vectors_save_and_load_round_trip(tmp_path):
    single = Vectors("e", "pixels", ["a", "b"], np.arange(6, dtype=np.float32).reshape(2, 3))
    multi = Vectors("m", "pixels", ["a", "b"], [np.ones((2, 3), np.float32), np.zeros((4, 3), np.float32)], "multi")
    text = Vectors("t", "pixels", ["a"], ["some text"], "text")
    for v in (single, multi, text):
        back = Vectors.load(v.save(tmp_path, v.encoder_id))
        assert (back.ids, back.provenance, back.kind, back.encoder_id) == (v.ids, v.provenance, v.kind, v.encoder_id)
    np.testing.assert_array_equal(Vectors.load(tmp_path / "m.npz").data[1], multi.data[1])


def test_appearance_encoder_has_no_text_side():
    with pytest.raises(encoders.EncodeError, match="pages only"):
        encoders.make_encoder("appearance").encode_queries(["x"], ["q"])


def test_missing_colpali_model_says_how_to_provide_one(tmp_path):
    with pytest.raises(encoders.EncodeError, match="set encode.colpali_model to a local folder"):
        encoders.make_encoder("colpali", model="")
    with pytest.raises(encoders.EncodeError, match="no config.json"):
        encoders.make_encoder("colpali", model=str(tmp_path))


def test_caption_text_joins_the_caption_fields():
    row = {"filename": "hg_2024q2_deck_p03.png", "alt_text": "bar chart", "caption": ""}
    assert encoders.caption_text(row) == "hg 2024q2 deck p03 bar chart"


def test_bm25_over_units_without_any_text_scores_zero():
    index = retrieve.BM25Index().add(Vectors("ocr-bm25", "pixels", ["a", "b"], ["", "   "], "text"))
    run = index.search(Vectors("q", "query-text", ["q"], ["revenue"], "text"), k=2)
    assert run["score"].tolist() == [0.0, 0.0]


def test_run_from_scores_keeps_top_k_in_canonical_order():
    from lookalike.retrieval import indexes as retrieve

    s = np.array([[0.2, 0.9, 0.2], [0.1, 0.3, 0.5]])
    r = retrieve.run_from_scores(s, ["q1", "q2"], ["a", "b", "c"], k=2)
    assert list(zip(r["query_id"], r["unit_id"])) == [("q1", "b"), ("q1", "c"), ("q2", "c"), ("q2", "b")]


@pytest.mark.parametrize("block_cells", [1 << 22, 7])
def test_a_full_score_matrix_cut_to_its_top_k_in_blocks_ranks_as_the_whole_matrix_does(monkeypatch, block_cells):
    """run_from_scores and BM25 search cut each block of rows to the columns that can stand in the top k
    before ranking: the same run as ranking every (query, unit) pair, ties at the cut (many equal
    scores, as BM25's zeros) broken by unit id, whatever the block size."""
    from lookalike.eval.ranking import rank

    monkeypatch.setattr(retrieve, "BLOCK_CELLS", block_cells)
    rng = np.random.default_rng(5)
    for trial in range(120):
        q, n, k = int(rng.integers(1, 6)), int(rng.integers(1, 50)), int(rng.integers(1, 15))
        s = rng.integers(0, 3, size=(q, n)).astype(float) if trial % 2 else rng.random((q, n))
        ids = [f"u{int(rng.integers(0, 10**6))}-{j}" for j in range(n)]
        qids = [f"q{i}" for i in range(q)]
        whole = rank(pd.DataFrame({"query_id": np.repeat(qids, n), "unit_id": ids * q, "score": s.ravel()}))
        want = whole[whole["rank"] <= k][["query_id", "unit_id", "score"]].reset_index(drop=True)
        pd.testing.assert_frame_equal(retrieve.run_from_scores(s, qids, ids, k), want)
    texts = ["revenue rose", "revenue fell", "margin", "", "revenue and margin"] * 3
    index = retrieve.BM25Index().add(Vectors("ocr-bm25", "pixels", [f"u{i:02d}" for i in range(15)], texts, "text"))
    queries = Vectors("q", "query-text", ["q1", "q2", "q3"], ["revenue", "margin", "dividend"], "text")
    run = index.search(queries, k=4)
    whole = rank(pd.DataFrame({"query_id": np.repeat(["q1", "q2", "q3"], 15), "unit_id": index.unit_ids * 3,
                               "score": index.scores(queries).ravel().astype(np.float64)}))
    pd.testing.assert_frame_equal(run, whole[whole["rank"] <= 4][["query_id", "unit_id", "score"]].reset_index(drop=True))


def test_the_pipeline_refuses_caption_vectors_handed_to_a_pixel_system():
    """build_runs takes what an index accepts from the system's declared provenance: caption
    vectors under the name of a pixel system are refused (it used to derive it from the vectors)."""
    from lookalike.retrieval import systems

    caption = Vectors("caption-minilm", "caption-text", ["u1", "u2"], np.eye(2, dtype=np.float32))
    queries = Vectors("caption-minilm", "query-text", ["q1"], np.ones((1, 2), np.float32))
    with pytest.raises(retrieve.ProvenanceError, match="accepts \\['pixels'\\] vectors only; got 'caption-text'"):
        systems.build_runs({"ocr-minilm": caption}, {"ocr-minilm": queries})
    assert "caption-minilm" in systems.build_runs({"caption-minilm": caption}, {"caption-minilm": queries})


def test_auto_device_without_an_nvidia_driver_is_cpu_and_asks_torch_nothing(monkeypatch):
    # no libcuda.so.1: torch.cuda.is_available() could only say False, so torch is not asked (nor
    # imported: 2-2.5 s in every stage that makes an encoder over a warm cache)
    import ctypes
    import sys

    from lookalike.retrieval.encoders import base

    def no_driver(name, *a, **k):
        raise OSError(f"{name}: cannot open shared object file")

    def must_not_ask():
        raise AssertionError("torch was asked")

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    monkeypatch.setattr(torch.cuda, "is_available", must_not_ask)
    assert base.resolve_device("auto") == ("cpu", "float32")
    assert base.resolve_device("cpu") == ("cpu", "float32")
    with pytest.raises(AssertionError, match="torch was asked"):
        base.resolve_device("cuda")                 # an explicit GPU request is still checked with torch


@pytest.mark.parametrize("platform, cuda", [("linux", True), ("linux", False), ("win32", True)])
def test_auto_device_asks_torch_when_a_driver_may_be_there(monkeypatch, platform, cuda):
    # the driver library loads (or the platform is not Linux): torch decides, as before
    import ctypes
    import sys

    from lookalike.retrieval.encoders import base

    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: object())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert base.resolve_device("auto") == (("cuda", "bfloat16") if cuda else ("cpu", "float32"))


def test_a_stage_process_making_a_cpu_encoder_does_not_import_torch_here():
    # on this machine (no NVIDIA driver) making an encoder over a warm cache needs no torch
    import ctypes
    import subprocess
    import sys

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        pass
    else:
        pytest.skip("an NVIDIA driver is present: torch decides the device")
    code = ("import sys; from lookalike.retrieval import systems; "
            "systems.make_encoder('caption-minilm', device='auto'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr
