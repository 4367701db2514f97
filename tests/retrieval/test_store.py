"""The float16 page store, exact MaxSim over it, and candidate search with its measured recall."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import store
from lookalike.retrieval import systems
from lookalike.retrieval.encoders.base import Vectors
from lookalike.retrieval.late_interaction import maxsim, padded_block

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import corpora  # noqa: E402


def ragged(rng, n=30, dim=16):
    pages = [rng.standard_normal((int(rng.integers(1, 40)), dim)).astype(np.float32) for _ in range(n)]
    pages[3] = np.zeros((0, dim), np.float32)                 # an empty page
    return pages


def test_store_round_trips_pages_as_float16_and_builds_the_same_blocks(tmp_path):
    rng = np.random.default_rng(0)
    pages = ragged(rng)
    store.PageStore.write(tmp_path / "s", [f"u{i}" for i in range(len(pages))], iter(pages), 16, "enc")
    half = [p.astype(np.float16).astype(np.float32) for p in pages]
    again = store.PageStore(tmp_path / "s")
    assert again.ids[5] == "u5" and again.encoder_id == "enc" and len(again) == 30
    assert again.nbytes == sum(len(p) for p in pages) * 16 * 2
    for i in (0, 3, 29):
        np.testing.assert_array_equal(again.read(i), half[i])
    idx = [0, 3, 7, 29]
    assert bool((again.pages().block(idx) == padded_block(half, idx, 16)).all())
    assert list(again.pages().lengths()) == [len(p) for p in pages]


def test_exact_scores_over_the_store_equal_maxsim_in_memory_bit_for_bit(tmp_path):
    rng = np.random.default_rng(1)
    pages = ragged(rng)
    queries = [rng.standard_normal((int(rng.integers(1, 9)), 16)).astype(np.float32) for _ in range(7)]
    st = store.PageStore.write(tmp_path / "s", [f"u{i}" for i in range(len(pages))], pages, 16)
    half = [p.astype(np.float16).astype(np.float32) for p in pages]
    np.testing.assert_array_equal(store.exact_scores(queries, st, memory_budget_mb=0.01), maxsim(queries, half))


def test_candidate_search_is_exact_when_every_page_is_a_candidate_and_rescore_agrees(tmp_path):
    rng = np.random.default_rng(2)
    pages = ragged(rng, n=40)
    pages[10] = pages[11].copy()                                # a tie
    queries = [rng.standard_normal((5, 16)).astype(np.float32) for _ in range(6)]
    st = store.PageStore.write(tmp_path / "s", [f"u{i}" for i in range(40)], pages, 16)
    cent = store.CentroidIndex.build(st, tmp_path / "c", clusters=4)
    exact = store.exact_scores(queries, st)
    idx, scores, cand = store.candidate_search(queries, st, cent, k=10, n_candidates=40)
    np.testing.assert_array_equal(idx, store.topk(exact, 10))
    np.testing.assert_array_equal(scores, np.take_along_axis(exact, idx, axis=1))
    assert store.candidate_recall(store.topk(exact, 100), cand) == {10: 1.0, 100: 1.0}
    # rescore multiplies only the queries that asked for a page, so its GEMMs have other shapes than
    # exact MaxSim's. Whether that moves the last bit depends on the CPU's BLAS kernels: on the
    # Intel machines of earlier sessions it did not; on an AMD EPYC, with this 16-dim toy, it did (up
    # to 3.8e-6 on scores near 30). So here the scores must agree to float32 rounding.
    some = np.sort(rng.choice(40, size=(6, 9)), axis=1)
    np.testing.assert_allclose(store.rescore(queries, st, some), np.take_along_axis(exact, some, axis=1),
                               rtol=4e-7, atol=0)


def test_candidate_recall_counts_what_the_candidates_miss():
    exact_top = np.array([[0, 1, 2, 3], [4, 5, 6, 7]])
    cand = np.array([[0, 1, 9], [4, 5, 6]])
    assert store.candidate_recall(exact_top, cand, ks=(2, 4)) == {2: 1.0, 4: (2 / 4 + 3 / 4) / 2}


def test_candidates_find_the_exact_top_10_on_structured_pages(tmp_path):
    queries, pages, _ = corpora.structured(400, 30, page_tokens=120, dim=64, seed=3)
    st = store.PageStore.write(tmp_path / "s", [f"u{i}" for i in range(400)], pages, 64)
    cent = store.CentroidIndex.build(st, tmp_path / "c", clusters=16)
    exact = store.topk(store.exact_scores(queries, st), 100)
    _, _, cand = store.candidate_search(queries, st, cent, k=10, n_candidates=60)
    assert store.candidate_recall(exact, cand)[10] >= 0.95


def test_a_truncated_store_names_the_page(tmp_path):
    st = store.PageStore.write(tmp_path / "s", ["a", "b"], [np.ones((3, 4)), np.ones((5, 4))], 4)
    with open(tmp_path / "s" / store.VECTORS, "r+b") as fh:
        fh.truncate(3 * 4 * 2 + 8)
    with pytest.raises(OSError, match="page 1 is cut short"):
        store.PageStore(tmp_path / "s").read(1)
    with pytest.raises(ValueError, match="expected \\(tokens, 4\\)"):
        store.PageStore.write(tmp_path / "t", ["a"], [np.ones((3, 5))], 4)
    assert len(st) == 2


def test_a_candidate_system_reports_its_candidate_recall_against_exact(tmp_path):
    queries, pages, targets = corpora.structured(300, 12, page_tokens=80, dim=32, seed=4)
    units = Vectors("toy-multi", "pixels", [f"u{i:03d}" for i in range(300)], pages, "multi")
    qv = Vectors("toy-multi", "query-text", [f"q{i}" for i in range(12)], queries, "multi")
    runs, recall = systems.search_systems({"toy": units}, {"toy": qv}, depth=20, search="candidates", n_candidates=40,
                                          clusters=8, recall_sample=12)
    assert set(recall) == {"toy"} and recall["toy"]["n"] == 12 and recall["toy"]["candidates"] == 40
    assert 0.0 <= recall["toy"]["recall_100"] <= recall["toy"]["recall_10"] <= 1.0
    assert len(runs["toy"]) == 12 * 20
    exact, plain = systems.search_systems({"toy": units}, {"toy": qv}, depth=20)
    assert plain == {}                                   # an exact search has nothing to report
    top1 = lambda r: r.sort_values(["query_id", "score"], ascending=[True, False]).groupby("query_id").head(1)  # noqa: E731
    agree = (top1(runs["toy"]).set_index("query_id")["unit_id"] == top1(exact["toy"]).set_index("query_id")["unit_id"])
    assert agree.mean() >= 0.9
    with pytest.raises(ValueError, match="search must be"):
        retrieve.MultiVectorIndex(search="approximate")
    assert isinstance(runs["toy"], pd.DataFrame)


def test_maxsim_scores_an_empty_page_alone_in_a_block_as_zero():
    """A defect found here: with a budget so small that an empty page got a block of its own, the
    similarity view used width 0 and maxsim raised."""
    q = [np.ones((3, 4), np.float32)]
    pages = [np.ones((2, 4), np.float32), np.zeros((0, 4), np.float32)]
    np.testing.assert_array_equal(maxsim(q, pages, memory_budget_mb=1e-6), np.array([[12.0, 0.0]], np.float32))


def test_int8_centroids_from_disk_equal_those_from_memory(tmp_path):
    rng = np.random.default_rng(5)
    pages = [rng.standard_normal((int(rng.integers(1, 6)), 8)).astype(np.float32) for _ in range(9)]
    st = store.PageStore.write(tmp_path / "c", [f"u{i}" for i in range(9)], pages, 8)
    a, b = store.Int8Centroids(st, 8, block_pages=4), store.Int8Centroids([st.read(i) for i in range(9)], 8)
    assert bool((a.tensor == b.tensor).all()) and a.width == 5 and a.scale == b.scale
    assert int(a.tensor.abs().max()) == 127 and a.nbytes == 9 * 5 * 8
    # a page's padding repeats its first vector; the quantized values are within half a step
    lengths = [len(p) for p in pages]
    two = a.tensor[2].float() * a.scale
    np.testing.assert_allclose(two[: lengths[2]].numpy(), st.read(2), atol=a.scale / 2 + 1e-7)
    assert bool((a.tensor[2, lengths[2]:] == a.tensor[2, 0]).all())


def test_the_int8_first_stage_is_exact_integer_arithmetic_whatever_the_gemm_or_blocking(tmp_path, monkeypatch):
    """Its scores equal a plain recomputation (float64 from the same integers), do not depend on
    the block size, and the float32 fallback (a torch without _int_mm) gives the same bits."""
    rng = np.random.default_rng(6)
    pages = [rng.standard_normal((int(rng.integers(1, 7)), 16)).astype(np.float32) for _ in range(50)]
    queries = [rng.standard_normal((int(rng.integers(1, 9)), 16)).astype(np.float32) for _ in range(7)]
    queries[3][1] = 0.0                                   # a zero token contributes 0
    c = store.Int8Centroids(pages, 16)
    got = c.scores(queries, memory_budget_mb=64)
    np.testing.assert_array_equal(c.scores(queries, memory_budget_mb=1e-6), got)
    C = c.tensor.numpy().astype(np.float64)
    for qi, q in enumerate(queries):
        qs = np.abs(q).max(axis=1) / 127
        qi8 = np.round(q / np.where(qs > 0, qs, 1)[:, None]).clip(-127, 127)
        dots = np.einsum("td,pkd->tpk", qi8, C).max(axis=2)          # (tokens, pages) integers
        np.testing.assert_allclose(got[qi], (dots * qs[:, None]).sum(axis=0) * c.scale, rtol=1e-6, atol=1e-5)
    monkeypatch.setattr(store, "_INT_MM", False)
    np.testing.assert_array_equal(c.scores(queries), got)
    # and it tracks float MaxSim against the centroids closely
    np.testing.assert_allclose(got, maxsim(queries, [p.astype(np.float16).astype(np.float32) for p in pages]),
                               atol=0.05 * max(len(q) for q in queries))
    with pytest.raises(ValueError, match="at most 1040"):
        store.Int8Centroids([np.zeros((2, 2000), np.float32)], 2000)


MULTI_PLUGIN = '''
import hashlib
import numpy as np
from PIL import Image
from lookalike.retrieval.encoders import Encoder, Vectors

def _word(w):
    h = hashlib.blake2b(w.encode(), digest_size=8).digest()
    v = np.frombuffer(h, dtype=np.uint8).astype(np.float32) - 127.5
    return v / np.linalg.norm(v)

class Patches(Encoder):
    """A toy multi-vector encoder: 8-dim vectors of a page's 4 x 4 grid of patches; words hashed."""
    name, provenance, kind = "patches", "pixels", "multi"

    def encode_units(self, units, base_dir, cache=None):
        from lookalike.data.schema import resolve_image
        out = []
        for p in units["image_path"]:
            with Image.open(resolve_image(p, base_dir)) as im:
                a = np.asarray(im.convert("L").resize((32, 32)), np.float32) / 255
            cells = a.reshape(4, 8, 4, 8).transpose(0, 2, 1, 3).reshape(16, 64)
            v = cells[:, ::8] - cells.mean()
            out.append((v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-6)).astype(np.float32))
        return Vectors(self.id, self.provenance, list(units["unit_id"]), out, "multi")

    def encode_queries(self, texts, ids):
        return Vectors(self.id, "query-text", list(ids),
                       [np.stack([_word(w) for w in (t.split() or ["?"])]) for t in texts], "multi")
'''


@pytest.mark.slow
def test_stage_02_reports_the_candidate_recall_of_a_candidate_based_system(tmp_path):
    import importlib

    from lookalike import params
    from lookalike import stages

    (tmp_path / "patches.py").write_text(MULTI_PLUGIN)
    run_file = tmp_path / "run.yaml"
    run_file.write_text(f'encode:\n  encoders: ["ocr-bm25", "appearance", "{tmp_path / "patches.py"}:Patches"]\n'
                        "retrieve:\n  search: candidates\n  candidates: 30\n  centroids: 4\n  recall_sample: 40\n")
    ctx = stages.context(tmp_path / "run", params.load_params(run_file))
    for module in ("stratify_corpus", "encode", "leak_ablation", "hard_negatives"):
        importlib.import_module(f"lookalike.stages.{module}").run(ctx).save()
    # the multi-vector pages live in the run's float16 store, which the later stages read (issue 18)
    assert Vectors.load(tmp_path / "run" / "vectors" / "patches.npz").stored
    assert (tmp_path / "run" / "vectors" / "patches.pages" / "centroids-4" / store.VECTORS).is_file()
    table = pd.read_csv(tmp_path / "run" / "tables" / "systems.csv").set_index("system")
    assert table.loc["patches", "search"] == "candidates" and table.loc["ocr-bm25", "search"] == "exact"
    assert 0.0 <= table.loc["patches", "candidate_recall_100"] <= table.loc["patches", "candidate_recall_10"] <= 1.0
    assert pd.isna(table.loc["ocr-bm25", "candidate_recall_10"])


def half(pages):
    return [np.asarray(p, np.float32).astype(np.float16).astype(np.float32) for p in pages]


def stored(tmp_path, pages, name="s"):
    ids = [f"u{i:03d}" for i in range(len(pages))]
    st = store.PageStore.write(tmp_path / name, ids, pages, int(np.asarray(pages[0]).shape[1]), "toy")
    return Vectors("toy", "pixels", ids, st.pages(), "multi")


def test_the_writer_refuses_a_vector_float16_cannot_hold_and_names_the_unit(tmp_path):
    w = store.PageWriter(tmp_path / "s")
    w.append("doc:1", np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="unit 'doc:2'.*not finite in float16"):
        w.append("doc:2", np.full((1, 4), 1e5, np.float32))          # beyond float16's 65504: would be inf
    with pytest.raises(ValueError, match="unit 'doc:3' has vectors of shape \\(2, 5\\)"):
        store.PageWriter(tmp_path / "t", 4).append("doc:3", np.ones((2, 5)))
    assert not (tmp_path / "s" / store.META).exists()                   # nothing readable was left behind


@pytest.mark.parametrize("budget", [0.002, 0.05, 512.0])
def test_exact_topk_keeps_the_full_matrix_top_k_and_every_tie_at_the_cut(budget):
    rng = np.random.default_rng(7)
    # values on a coarse grid: many pages tie, also at the k-th score
    pages = [np.round(rng.standard_normal((int(rng.integers(1, 6)), 4)) * 2) / 2 for _ in range(700)]
    pages = [p.astype(np.float32) for p in pages]
    queries = [np.round(rng.standard_normal((3, 4)) * 2).astype(np.float32) / 2 for _ in range(5)]
    full = maxsim(queries, pages)
    idx, scores = store.exact_topk(queries, pages, 10, budget)
    for q in range(len(queries)):
        kth = np.sort(full[q])[::-1][9]
        want = set(np.flatnonzero(full[q] >= kth))
        got = set(idx[q][idx[q] >= 0])
        assert got == want                                           # the top 10 and every page tied with the 10th
        np.testing.assert_array_equal(scores[q][idx[q] >= 0], full[q][idx[q][idx[q] >= 0]])
    np.testing.assert_array_equal(store.canonical_rows(idx, scores, 10), store.topk(full, 10))


def test_a_stored_index_gives_the_in_memory_run_over_the_same_float16_pages(tmp_path):
    queries, pages, _ = corpora.structured(400, 9, page_tokens=40, dim=16, seed=3)
    pages[5] = pages[6].copy()                                       # a tie: the canonical rule decides
    qv = Vectors("toy", "query-text", [f"q{i}" for i in range(9)], queries, "multi")
    on_disk = stored(tmp_path, pages)
    in_memory = Vectors("toy", "pixels", list(on_disk.ids), half(pages), "multi")
    for search in ("exact", "candidates"):
        a = retrieve.MultiVectorIndex(search=search, n_candidates=60, clusters=4, memory_budget_mb=0.05)
        b = retrieve.MultiVectorIndex(search=search, n_candidates=60, clusters=4)
        pd.testing.assert_frame_equal(a.add(on_disk).search(qv, k=15), b.add(in_memory).search(qv, k=15))
        if search == "candidates":
            assert a.candidate_recall(qv, 9) == b.candidate_recall(qv, 9)
            assert (tmp_path / "s" / "centroids-4" / store.VECTORS).is_file()   # centroids on disk, beside the pages


def test_indexing_stored_pages_reads_no_page_and_a_second_add_is_refused(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    vecs = stored(tmp_path, [rng.standard_normal((5, 8)).astype(np.float32) for _ in range(50)])
    reads = []
    monkeypatch.setattr(store.PageStore, "read", lambda self, i: reads.append(i))
    index = retrieve.MultiVectorIndex().add(vecs)                   # indexing must not copy the pages into memory
    assert reads == [] and index.stored and vecs.describe().endswith("float16 on disk")
    assert list(vecs.token_counts()) == [5] * 50 and vecs.dim == 8 and reads == []
    with pytest.raises(ValueError, match="one add"):
        index.add(vecs)


def test_candidate_search_in_blocks_of_questions_gives_the_same_candidates_and_scores(tmp_path):
    """The first stage's (questions x pages) scores are bounded by the memory budget: questions go in
    blocks (here one at a time), and nothing a question gets depends on its block."""
    queries, pages, _ = corpora.structured(300, 7, page_tokens=30, dim=16, seed=5)
    st = store.PageStore.write(tmp_path / "s", [f"u{i}" for i in range(300)], pages, 16)
    cent = store.CentroidIndex.build(st, tmp_path / "c", clusters=4).first_stage()
    whole = store.candidate_search(queries, st, cent, k=10, n_candidates=40, memory_budget_mb=512.0)
    one_by_one = store.candidate_search(queries, st, cent, k=10, n_candidates=40, memory_budget_mb=0.003)
    for a, b in zip(whole, one_by_one):
        np.testing.assert_array_equal(a, b)
