"""The human judge (judging.human): people's labels from a file, and a pair nobody labelled named."""

from __future__ import annotations

import pytest
from lookalike.judging import judges


def test_human_labels(tmp_path):
    (tmp_path / "labels.csv").write_text("query_id,unit_id,label,note\nq1,u1,supporting,partial table\n")
    judge = judges.HumanJudge(tmp_path / "labels.csv")
    got = judge.judge({"query_id": "q1"}, {"unit_id": "u1"})
    assert (got.label, got.rationale, got.judge) == ("supporting", "partial table", "human")
    with pytest.raises(judges.JudgeError, match="no human label"):
        judge.judge({"query_id": "q2"}, {"unit_id": "u1"})
    (tmp_path / "bad.csv").write_text("query_id,unit_id,label\nq1,u1,maybe\n")
    with pytest.raises(judges.JudgeError, match="bad.csv: row 1 label 'maybe'"):
        judges.HumanJudge(tmp_path / "bad.csv")
