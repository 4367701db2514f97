"""Your questions, qrels and runs: formats, page base, document level, unknown ids, external runs."""

import numpy as np
import pandas as pd
import pytest
from lookalike.data.schema import CorpusError
from lookalike.eval import metrics
from lookalike.eval import ranking
from lookalike.io import inputs

UNITS = ["d1:1", "d1:2", "d1:3", "d2:1", "d2:2"]


def test_questions_jsonl_and_csv_with_mapping(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"query_id": "a", "text": "What was revenue?", "answer": "$5M"}\n\n'
                 '{"query_id": "a", "text": "dup"}\n{"query_id": "b c", "text": "space"}\n{"query_id": "d", "text": " "}\n')
    q, skipped = inputs.read_questions(p)
    assert list(q["query_id"]) == ["a"] and q.loc[0, "answer"] == "$5M"
    assert [s.split(" ")[0] for s in skipped["problem"]] == ["duplicate", "query_id", "missing"]
    c = tmp_path / "qna.csv"
    c.write_text("\ufeffQuestion,Source Docs,Answer\nHow did sales change?,*AAPL*,Up\nAnd costs?,*AAPL*,Down\n",
                 encoding="utf-8")
    q, _ = inputs.read_questions(c, columns="text=Question,answer=Answer", id_template="docu_{row:03d}")
    assert list(q["query_id"]) == ["docu_000", "docu_001"] and q.loc[1, "answer"] == "Down"
    with pytest.raises(CorpusError, match="no question text column"):
        inputs.read_questions(c)
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("text\nCaf\xe9 revenue?\n".encode("latin-1"))
    with pytest.raises(CorpusError, match="not UTF-8"):
        inputs.read_questions(bad)


def test_qrels_three_way_labels_and_unknown_ids(tmp_path):
    p = tmp_path / "q.qrels"
    p.write_text("a 0 d1:1 sufficient\na 0 d1:2 1\na 0 zz:1 2\nx 0 d1:1 2\na 0 d1:3 maybe\n")
    q, skipped = inputs.read_judgements(p, UNITS, ["a"])
    assert list(zip(q["unit_id"], q["relevance"])) == [("d1:1", 2), ("d1:2", 1)]
    assert [r for r in skipped["row"]] == [3, 4, 5]
    assert "unknown unit 'zz:1'" in skipped.loc[0, "problem"] and "unknown query 'x'" in skipped.loc[1, "problem"]


def test_page_base_zero_is_normalised_and_a_wrong_base_is_named(tmp_path):
    p = tmp_path / "q.qrels"
    p.write_text("a 0 d1:0 1\na 0 d2:1 2\n")
    q, _ = inputs.read_judgements(p, UNITS, ["a"], page_base=0)
    assert list(q["unit_id"]) == ["d1:1", "d2:2"]
    p.write_text("a 0 d1:0 1\na 0 d2:0 2\n")                       # 0-based pages declared as 1-based
    with pytest.raises(CorpusError, match="page base"):
        inputs.read_judgements(p, UNITS, ["a"], page_base=1)


def test_document_level_qrels_score_each_document_by_its_best_page(tmp_path):
    p = tmp_path / "docs.tsv"
    p.write_text("question_id\tdoc_name\trelevance\tpdf_staged\na\td 1\t1\tTrue\na\tmissing doc\t1\tFalse\n")
    q, skipped = inputs.read_judgements(p, UNITS, ["a"], level="document", doc_ids=["d_1", "d_2"])
    assert list(q["unit_id"]) == ["d_1"] and "unknown document" in skipped.loc[0, "problem"]
    run = pd.DataFrame({"query_id": "a", "unit_id": ["d_2:1", "d_1:3", "d_1:1", "d_2:2"], "score": [0.9, 0.8, 0.1, 0.2]})
    doc = inputs.document_run(run, {"d_1:1": "d_1", "d_1:3": "d_1", "d_2:1": "d_2", "d_2:2": "d_2"})
    assert dict(zip(doc["unit_id"], doc["score"])) == {"d_1": 0.8, "d_2": 0.9}
    ev = metrics.evaluate(q, doc, ["recip_rank"])
    assert ev.per_query.loc["a", "recip_rank"] == 0.5


def test_external_run_scores_identically_to_the_same_run_produced_internally(tmp_path):

    rng = np.random.default_rng(3)
    internal = pd.DataFrame({"query_id": np.repeat(["a", "b"], 5), "unit_id": UNITS * 2, "score": rng.random(10)})
    qrels = pd.DataFrame({"query_id": ["a", "b"], "unit_id": ["d1:2", "d2:1"], "relevance": [1, 2]})
    ranking.write_run(internal, tmp_path / "mine.run", tag="mine")
    external, skipped = inputs.read_external_run(tmp_path / "mine.run", UNITS, ["a", "b"])
    assert skipped.empty
    m = ["ndcg_cut_10", "recall_5", "recip_rank", "map"]
    assert metrics.evaluate(qrels, external, m).per_query.equals(metrics.evaluate(qrels, internal, m).per_query)
    # 0-based pages, unknown queries and units
    (tmp_path / "zero.run").write_text("a Q0 d1:0 1 3.0 x\na Q0 nope:1 2 2.0 x\nz Q0 d1:1 1 1.0 x\n")
    run, skipped = inputs.read_external_run(tmp_path / "zero.run", UNITS, ["a"], page_base=0)
    assert list(run["unit_id"]) == ["d1:1"] and len(skipped) == 2
    with pytest.raises(CorpusError, match="page base is wrong: the file evidently counts pages from 0"):
        (tmp_path / "z2.run").write_text("a Q0 d1:0 1 3.0 x\na Q0 d2:0 2 2.0 x\n")
        inputs.read_external_run(tmp_path / "z2.run", UNITS, ["a"])
