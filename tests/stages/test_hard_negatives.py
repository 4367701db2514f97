"""Stage 04, hard negatives (stages.hard_negatives)."""

from __future__ import annotations

from tests.stages.recording import (call, recorded_input)


def test_stage_04_headline_without_scored_questions(recorded):
    top1 = recorded_input(recorded, "hard_negatives", "headline_section", "top1_table")
    docs = recorded_input(recorded, "hard_negatives", "headline_section", "doc_table")
    sec, = call(recorded, "hard_negatives", "headline_section", top1_table=top1.iloc[:0], doc_table=docs.iloc[:0])
    assert "no page-single questions scored" in sec.sentence
