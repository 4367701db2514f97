"""The run's store: page texts and question vectors computed once, read by later stages, never stale."""

import os

import numpy as np
import pandas as pd

from lookalike.retrieval import runstore, systems
from lookalike.retrieval.encoders.base import Vectors


class CountingEncoder:
    """Encodes a text as a vector of its character codes; counts what it was asked."""

    def __init__(self, encoder_id="toy@1", kind="single"):
        self.id, self.kind, self.calls = encoder_id, kind, []

    def encode_queries(self, texts, ids):
        self.calls.append(list(texts))
        rows = [np.array([len(t), sum(map(ord, t)) % 97, 1.0], np.float32) for t in texts]
        if self.kind == "multi":
            return Vectors(self.id, "query", list(ids), [np.stack([r, r * 2]) for r in rows], "multi")
        return Vectors(self.id, "query", list(ids), np.stack(rows), "single")


def test_a_question_is_encoded_once_and_later_stages_read_it(tmp_path):
    enc = CountingEncoder()
    first, n1 = runstore.query_vectors(tmp_path, "toy", enc.id, ["q1", "q2"], ["alpha", "beta"], enc.encode_queries)
    again, n2 = runstore.query_vectors(tmp_path, "toy", enc.id, ["q2", "q3", "q1"], ["beta", "gamma", "alpha"],
                                       enc.encode_queries)
    assert (n1, n2) == (2, 1) and enc.calls == [["alpha", "beta"], ["gamma"]]
    assert again.ids == ["q2", "q3", "q1"]
    assert np.array_equal(again.data[[0, 2]], first.data[[1, 0]])
    # a new process (a later stage) reads the same bytes
    third, n3 = runstore.query_vectors(tmp_path, "toy", enc.id, ["q1"], ["alpha"], CountingEncoder().encode_queries)
    assert n3 == 0 and np.array_equal(third.data, first.data[:1])


def test_another_model_or_a_changed_question_is_encoded_again(tmp_path):
    enc = CountingEncoder("toy@1")
    runstore.query_vectors(tmp_path, "toy", enc.id, ["q1"], ["alpha"], enc.encode_queries)
    other = CountingEncoder("toy@2")
    _, n = runstore.query_vectors(tmp_path, "toy", other.id, ["q1"], ["alpha"], other.encode_queries)
    assert n == 1 and other.calls == [["alpha"]]
    _, n = runstore.query_vectors(tmp_path, "toy", other.id, ["q1"], ["alpha, edited"], other.encode_queries)
    assert n == 1


def test_multi_vector_questions_round_trip_and_duplicates_are_encoded_once(tmp_path):
    enc = CountingEncoder(kind="multi")
    v, n = runstore.query_vectors(tmp_path, "colpali", enc.id, ["a", "b", "c"], ["same", "same", "other"],
                                  enc.encode_queries)
    assert n == 2 and enc.calls == [["same", "other"]]
    assert v.kind == "multi" and np.array_equal(v.data[0], v.data[1]) and v.data[2].shape == (2, 3)


def test_page_texts_come_from_the_store_until_a_page_changes(tmp_path):
    img = tmp_path / "p1.png"
    img.write_bytes(b"one")
    calls = []

    def compute():
        calls.append(1)
        return {"u1": f"text {len(calls)}"}

    assert runstore.page_texts(tmp_path, "tesseract@5", ["u1"], [img], compute) == {"u1": "text 1"}
    assert runstore.page_texts(tmp_path, "tesseract@5", ["u1"], [img], compute) == {"u1": "text 1"}
    assert len(calls) == 1
    assert runstore.page_texts(tmp_path, "rapidocr@1", ["u1"], [img], compute) == {"u1": "text 2"}
    img.write_bytes(b"a changed page")
    os.utime(img, ns=(1, 1))
    assert runstore.page_texts(tmp_path, "tesseract@5", ["u1"], [img], compute) == {"u1": "text 3"}


def test_systems_encode_queries_uses_the_store_when_given_a_run(tmp_path):
    questions = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["What was revenue in 2021?", "Who signed it?"]})
    settings = dict(ocr_engine="", device="cpu", batch_size=32, workers=1)
    plain = systems.encode_queries(questions, ["ocr-minilm", "ocr-bm25"], **settings)
    stored = systems.encode_queries(questions, ["ocr-minilm", "ocr-bm25"], run_dir=tmp_path, **settings)
    assert np.allclose(stored["ocr-minilm"].data, plain["ocr-minilm"].data, atol=1e-6)
    assert stored["ocr-bm25"].data == plain["ocr-bm25"].data            # texts: nothing kept
    held = list((tmp_path / runstore.STORE / "queries").glob("*.npz"))
    assert len(held) == 1 and held[0].name.startswith("ocr-minilm")
    subset = systems.encode_queries(questions.iloc[[1]], ["ocr-minilm"], run_dir=tmp_path, **settings)
    assert np.array_equal(subset["ocr-minilm"].data[0], stored["ocr-minilm"].data[1])
