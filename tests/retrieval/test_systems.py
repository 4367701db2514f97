"""The systems' runs (retrieval.systems)."""

from __future__ import annotations

import numpy as np
import pytest
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval.encoders.base import Vectors
from lookalike.io.cache import Cache
from lookalike.retrieval import systems
from tests.conftest import REPO, with_corrupt_page
from tests.retrieval.test_store import half


def test_the_pipeline_refuses_caption_vectors_handed_to_a_pixel_system():
    """build_runs takes what an index accepts from the system's declared provenance: caption
    vectors under the name of a pixel system are refused (it used to derive it from the vectors)."""
    from lookalike.retrieval import systems

    caption = Vectors("caption-minilm", "caption-text", ["u1", "u2"], np.eye(2, dtype=np.float32))
    queries = Vectors("caption-minilm", "query-text", ["q1"], np.ones((1, 2), np.float32))
    with pytest.raises(retrieve.ProvenanceError, match="accepts \\['pixels'\\] vectors only; got 'caption-text'"):
        systems.build_runs({"ocr-minilm": caption}, {"ocr-minilm": queries})
    assert "caption-minilm" in systems.build_runs({"caption-minilm": caption}, {"caption-minilm": queries})


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
    from tests import tiny_colpali

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
