"""Page base never shifts silently: every file a user brings (qrels, runs, blind queries, regression
reports, human labels) is refused when its page numbers contradict corpus.page_base — under base 1
any page-0 id, under base 0 any id naming page N of an N-page document — and read exactly when the
declaration is right. Realistic files: 10-page documents, about 10% of rows on the edge page."""

import numpy as np
import pandas as pd
import pytest
from lookalike.analysis import leakage
from lookalike.io import inputs, pagebase
from lookalike.judging import judges

DOCS = [f"report_{i}" for i in range(12)]
UNITS = [f"{d}:{p}" for d in DOCS for p in range(1, 11)]          # the corpus: 1-based, 10 pages each
QUERIES = [f"q{i:02d}" for i in range(40)]


def _pages(rng, n, base):
    """n page numbers in the given base, 10% on the edge page (0 under base 0, 10 under base 1)."""
    lo, hi = (0, 9) if base == 0 else (1, 10)
    pages = rng.integers(lo + 1, hi, size=n)          # interior pages
    edge = rng.choice(n, size=max(1, n // 10), replace=False)
    pages[edge] = lo if base == 0 else hi
    return pages


def _qrels(tmp_path, base):
    rng = np.random.default_rng(5)
    rows, seen = [], set()
    for q, d, p in zip(np.repeat(QUERIES, 2), rng.choice(DOCS, 80), _pages(rng, 80, base)):
        if (q, d, p) not in seen:
            seen.add((q, d, p))
            rows.append(f"{q} 0 {d}:{p} 1")
    path = tmp_path / f"qrels_base{base}.txt"
    path.write_text("\n".join(rows) + "\n")
    return path, rows


@pytest.mark.parametrize("declared", [0, 1])
def test_qrels_in_the_other_base_are_refused_with_counts_examples_and_the_evident_base(tmp_path, declared):
    path, rows = _qrels(tmp_path, 1 - declared)
    with pytest.raises(pagebase.PageBaseError) as err:
        inputs.read_judgements(path, UNITS, QUERIES, page_base=declared)
    msg = str(err.value)
    assert str(path) in msg and f"of {len(rows)} judged page ids" in msg and "row " in msg
    assert f"evidently counts pages from {1 - declared}" in msg and f"page_base: {1 - declared}" in msg


@pytest.mark.parametrize("base", [0, 1])
def test_qrels_in_the_declared_base_are_read_whole_and_aligned(tmp_path, base):
    path, rows = _qrels(tmp_path, base)
    qrels, skipped = inputs.read_judgements(path, UNITS, QUERIES, page_base=base)
    assert len(qrels) == len(rows) and skipped.empty
    written = [r.split()[2] for r in rows]
    assert list(qrels["unit_id"]) == [pagebase.shift(u, 1 - base) for u in written]


def _run(tmp_path, base, depth=100):
    lines = []
    rng = np.random.default_rng(9)
    for q in QUERIES[:5]:
        units = rng.permutation(len(UNITS))[:depth]
        for rank, i in enumerate(units, start=1):
            d, p = UNITS[i].rsplit(":", 1)
            lines.append(f"{q} Q0 {d}:{int(p) - 1 + base} {rank} {depth - rank + 1}.0 mine")
    path = tmp_path / f"run_base{base}.run"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_zero_based_run_of_depth_100_is_refused_under_base_1_and_read_under_base_0(tmp_path):
    path = _run(tmp_path, 0)
    with pytest.raises(pagebase.PageBaseError, match=r"ranked page ids name page 0 .*evidently counts pages from 0"):
        inputs.read_external_run(path, UNITS, QUERIES, page_base=1)
    run, skipped = inputs.read_external_run(path, UNITS, QUERIES, page_base=0)
    assert len(run) == 500 and skipped.empty and set(run["unit_id"]) <= set(UNITS)
    one = _run(tmp_path, 1)
    with pytest.raises(pagebase.PageBaseError, match="evidently counts pages from 1"):
        inputs.read_external_run(one, UNITS, QUERIES, page_base=0)


def _units_frame():
    return pd.DataFrame({"unit_id": UNITS, "caption": [f"caption {u}" for u in UNITS], "alt_text": "",
                         "content_type": "chart", "entity": "", "metric": "", "period": ""})


def test_blind_queries_regressions_and_human_labels_check_the_base_too(tmp_path):
    zero = [f"{d}:0" for d in DOCS[:2]] + [f"{d}:{p}" for d in DOCS[:6] for p in (3, 4, 5)]   # 2 of 20 on page 0
    pd.DataFrame({"query_id": [f"b{i}" for i in range(len(zero))], "unit_id": zero,
                  "text": "the chart as I saw it"}).to_csv(tmp_path / "blind.csv", index=False)
    with pytest.raises(pagebase.PageBaseError, match="2 of 20 page ids name page 0"):
        leakage.read_blind_queries(tmp_path / "blind.csv", _units_frame(), page_base=1)
    got, _ = leakage.read_blind_queries(tmp_path / "blind.csv", _units_frame(), page_base=0)
    assert set(got.loc[got["query_set"] == "blind", "unit_id"]) == {pagebase.shift(u, 1) for u in zero}

    pd.DataFrame({"text": "where is it", "expected_unit_id": zero, "returned_unit_id": ""}).to_csv(
        tmp_path / "reg.csv", index=False)
    with pytest.raises(pagebase.PageBaseError, match="expected_unit_id name page 0"):
        inputs.read_regressions(tmp_path / "reg.csv", UNITS, page_base=1)
    rows, skipped = inputs.read_regressions(tmp_path / "reg.csv", UNITS, page_base=0)
    assert len(rows) == 20 and skipped.empty and "report_0:1" in set(rows["expected_unit_id"])

    last = [f"{d}:10" for d in DOCS[:2]] + [f"{d}:{p}" for d in DOCS[:6] for p in (3, 4, 5)]    # 1-based, page 10 of 10
    pd.DataFrame({"query_id": "q00", "unit_id": last, "label": "irrelevant"}).to_csv(tmp_path / "lab.csv", index=False)
    with pytest.raises(judges.JudgeError, match=r"'report_0:10' is page 10 of a 10-page document"):
        judges.HumanJudge(tmp_path / "lab.csv", UNITS, page_base=0)
    judge = judges.HumanJudge(tmp_path / "lab.csv", UNITS, page_base=1)
    assert judge.judge({"query_id": "q00"}, {"unit_id": "report_0:10"}).label == "irrelevant"


def test_ids_without_pages_or_of_unknown_documents_are_left_to_the_unknown_unit_check():
    pagebase.check("f.csv", ["img_001.png", "other_doc:0", "report_0:5"], 1, UNITS)      # no error
    with pytest.raises(pagebase.PageBaseError, match="must be 0 or 1"):
        pagebase.check("f.csv", ["report_0:5"], 2, UNITS)
