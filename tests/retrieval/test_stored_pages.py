"""Multi-vector pages in the report live in a float16 page store on disk (issue 18): encoders stream
into it, indexes search it a block at a time, the run's vectors/<system>.npz names it, and nothing
reads the corpus into memory to build an index."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from lookalike.io.cache import Cache
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import store
from lookalike.retrieval import systems
from lookalike.retrieval.encoders.base import Vectors
from lookalike.retrieval.late_interaction import maxsim

from conftest import REPO, with_corrupt_page

sys.path.insert(0, str(REPO / "benchmarks"))
import corpora  # noqa: E402


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


def test_saved_stored_vectors_name_their_store_and_load_lazily(tmp_path):
    rng = np.random.default_rng(1)
    pages = [rng.standard_normal((int(n), 8)).astype(np.float32) for n in (3, 1, 4)]
    vecs = stored(tmp_path / "vectors", pages, name="toy.pages")
    path = vecs.save(tmp_path / "vectors", "toy")
    with np.load(path) as z:
        assert "data" not in z.files                                 # the vectors stay in the store
    back = Vectors.load(path)
    assert back.stored and back.ids == vecs.ids
    for a, b in zip(back.data, half(pages)):
        np.testing.assert_array_equal(a, b)
    # saved elsewhere: the store is copied beside the npz, page by page
    back.save(tmp_path / "other", "toy")
    again = Vectors.load(tmp_path / "other" / "toy.npz")
    assert again.data.store.folder == tmp_path / "other" / "toy.pages"
    np.testing.assert_array_equal(again.data[2], back.data[2])


def test_a_plug_in_multi_vector_system_is_written_to_the_runs_store(tmp_path, tiny_pages):
    units, root = tiny_pages
    plugin = f"{REPO / 'tests' / 'plugins' / 'word_vectors.py'}:WordVectors"
    kw = dict(ocr_engine="", device="cpu", batch_size=2, workers=0, colpali_model="", colpali_family="",
              settings={}, encoders=[plugin])
    stale = tmp_path / "v" / "word-vectors.pages" / "centroids-4"
    stale.mkdir(parents=True)                                        # an earlier run's candidate index
    vecs, table, _ = systems.encode_units(units, root, [plugin], Cache(tmp_path / "c"), store_root=tmp_path / "v", **kw)
    assert not stale.exists()                                        # new pages: the old centroids go too
    got = vecs["word-vectors"]
    assert got.stored and got.data.store.folder == tmp_path / "v" / "word-vectors.pages"
    assert "float16 on disk" in table.loc[0, "shape"]
    plain, _, _ = systems.encode_units(units, root, [plugin], Cache(tmp_path / "c"), **kw)
    for a, b in zip(got.data, half(plain["word-vectors"].data)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_colpali_streams_its_pages_into_the_store_and_reports_a_corrupt_one(tmp_path, tiny_pages):
    import tiny_colpali

    units, root = tiny_pages
    units = with_corrupt_page(units, root)
    tiny_colpali.save("ColIdefics3", tmp_path / "model")
    kw = dict(ocr_engine="", device="cpu", batch_size=2, workers=0, colpali_model=str(tmp_path / "model"),
              colpali_family="", settings={}, encoders=["colpali"])
    cache = Cache(tmp_path / "cache")
    memory, _, _ = systems.encode_units(units, root, ["colpali"], cache, **kw)
    fresh, _, _ = systems.encode_units(units, root, ["colpali"], Cache(tmp_path / "cache2"),
                                    store_root=tmp_path / "v", **kw)
    warm, _, _ = systems.encode_units(units, root, ["colpali"], cache, store_root=tmp_path / "w", **kw)
    for vecs in (fresh["colpali"], warm["colpali"]):
        assert vecs.stored and vecs.ids == ["doc:1", "doc:2", "doc:3"]
        assert [u for u, _ in vecs.stats["failed"]] == ["doc:9"]        # reported and left out, not the run
        for a, b in zip(vecs.data, half(memory["colpali"].data)):
            np.testing.assert_array_equal(a, b)                         # the same batches, so the same vectors
    assert warm["colpali"].stats["computed"] == 0 and warm["colpali"].stats["cached"] == 3


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
