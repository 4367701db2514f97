"""Stage 07, the metric tables (stages.metric_tables): each section on its edge cases (nothing compared, one component, nothing planted, no validated question) and the sufficiency outcomes."""

from __future__ import annotations

import copy
import re
import numpy as np
import pandas as pd
from lookalike import stages
from tests.stages.recording import (MODULES, call, recorded_input)
import pytest


def test_top1_random_chance_is_one_over_the_candidates(recorded):
    sec, table = call(recorded, "metric_tables", "top1_random_section")
    questions = recorded_input(recorded, "metric_tables", "top1_random_section", "questions")
    distractors = recorded_input(recorded, "metric_tables", "top1_random_section", "distractors")
    single = questions[questions["evidence_structure"] == "page-single"]
    rand = distractors[distractors["axis"] == "random"].groupby("query_id")["unit_id"].apply(set)
    expected = np.mean([1 / len({g} | rand.get(q, set())) for q, g in zip(single["query_id"],
                                                                          single["evidence_unit_ids"])])
    assert len(table) and np.allclose(table["chance"], expected)
    assert ((table["top1_lo"] <= table["top1"]) & (table["top1"] <= table["top1_hi"])).all()
    assert (table["n"] == len(single)).all()


def test_top1_random_without_page_single_questions_is_a_sentence(recorded):
    questions = recorded_input(recorded, "metric_tables", "top1_random_section", "questions")
    sec, table = call(recorded, "metric_tables", "top1_random_section",
                      questions=questions.assign(evidence_structure="multi-page"))
    assert table.empty and "no page-single questions" in sec.text["top1_random"]


def test_sufficiency_outcomes_add_up_to_one_per_system_and_k(recorded):
    sec, hard_runs, suff_hard, frames_hard, sufficiency, hard_sets = call(recorded, "metric_tables",
                                                                          "sufficiency_section")
    total = sufficiency["sufficient"] + sufficiency["supporting_only"] + sufficiency["neither"]
    assert len(sufficiency) and np.allclose(total, 1.0)
    assert set(suff_hard["system"]) == set(hard_runs) == set(frames_hard)
    assert set(sufficiency["negatives"]) == {"hard", "corpus"}
    # the hard columns hold exactly the questions whose candidate set is larger than their largest k
    inside = set(hard_sets.loc[hard_sets["in_hard"], "query_id"])
    assert (hard_sets.loc[hard_sets["in_hard"], "candidates"] > 5).all() and (suff_hard["n"] == len(inside)).all()
    assert all(set(run["query_id"]) == inside for run in hard_runs.values())


def test_planner_with_nothing_compared_says_so(recorded):
    significance = pd.DataFrame()
    sec, plan = call(recorded, "metric_tables", "planner_section", significance=significance)
    assert plan.empty and list(plan.columns) == MODULES["metric_tables"].PLANNER_COLUMNS
    assert sec.text["planner"].strip() == "nothing to compare"


def test_fusion_with_one_component_traces_nothing(recorded):
    base = recorded_input(recorded, "metric_tables", "fusion_section", "base")
    sec, counts = call(recorded, "metric_tables", "fusion_section", base=list(base)[:1])
    assert counts.empty and "fewer than two component systems" in sec.text["fusion"]
    assert sec.tables["fusion_trace"].empty


def test_planted_section_on_a_corpus_that_plants_nothing(recorded):
    x = copy.copy(recorded_input(recorded, "metric_tables", "planted_section", "x"))
    x.earlier = dict(x.earlier, planted=pd.DataFrame())
    sec, effects = call(recorded, "metric_tables", "planted_section", x=x)
    assert effects.empty and "planted_effects" not in sec.tables
    assert "this corpus plants nothing" in sec.text["planted"]


def test_planted_section_on_the_demo_recovers_what_it_planted(recorded):
    sec, effects = call(recorded, "metric_tables", "planted_section")
    assert len(effects) and set(sec.tables) == {"planted_effects"}
    assert "ok" in effects.columns and effects["effect"].is_unique


def test_source_structure_names_a_missing_column(recorded):
    sec, cells = call(recorded, "metric_tables", "source_structure_section", source_column="no_such_column")
    assert cells.empty and "'no_such_column' is not a units column" in sec.text["source_structure"]
    assert "07_source_structure" not in sec.figures


def test_stage_07_headline_without_validated_questions(recorded):
    from lookalike.report import claims

    none = claims.claims_record([claims.verdict_claim(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())])["claims"][0]
    sec, = call(recorded, "metric_tables", "stage_headline_section", verdict=none)
    assert sec.sentence.startswith("No system can be named best under hard negatives") and sec.numbers == {}


def test_headline_table_has_one_row_per_hard_system_with_its_n(recorded):
    sec, headline = call(recorded, "metric_tables", "headline_section")
    suff = recorded_input(recorded, "metric_tables", "headline_section", "suff_hard")
    assert sorted(headline["system"]) == sorted(suff["system"].unique())
    n = suff[suff["k"] == 1].set_index("system")["n"]
    assert all(int(r["n (validated)"]) == int(n[r["system"]]) for _, r in headline.iterrows())


def test_summary_blocks_without_scored_questions_keep_only_what_was_scored_and_the_labels(recorded):
    x = copy.copy(recorded_input(recorded, "metric_tables", "summary_section", "x"))
    t = recorded_input(recorded, "metric_tables", "summary_section", "t")
    x.validated = x.validated.iloc[:0]
    from lookalike.report import summary

    blocks = summary.blocks(MODULES["metric_tables"].summary_inputs(x, t, {"scored": {"text": "0 of 0"}}, "doc_id", "page"))
    assert [b.heading for b in blocks][0] == "What was scored"
    assert {b.heading for b in blocks} <= {"What was scored", "How the labels were made", "What the labels rest on",
                                           "People-judged questions a machine judge flagged"}
    full = summary.blocks(MODULES["metric_tables"].summary_inputs(recorded_input(recorded, "metric_tables", "summary_section",
                                                                            "x"), t, {"scored": {"text": "9 of 9"}},
                                                             "doc_id", "image"))
    assert len(full) > len(blocks) and full[0].text == "9 of 9"
    # the units' noun reaches every sentence of every block
    assert not any(re.search(r"\bpages?\b(?!-)", b.text + b.note) for b in full), [b.text for b in full]


def test_a_system_the_params_no_longer_have_is_not_read_from_an_earlier_runs_files(recorded, tmp_path):
    """Run files an earlier run left in the folder (an encoder or a +rerank taken out of the params
    since) were read by stage 07 as systems of this run: it globbed runs/*+rerank.run and
    runs_validated/*.run. Now stage 02 and 06 empty their run folders before writing, and stage 07 takes
    the +rerank / +split systems from stage 02's systems table."""
    import shutil

    ctx, _, _ = recorded
    run_dir = tmp_path / "run"
    shutil.copytree(ctx.run_dir, run_dir)
    for folder, name in (("runs", "gone+rerank"), ("runs_validated", "gone"), ("runs_hard", "gone")):
        shutil.copy(run_dir / folder / "ocr-bm25.run", run_dir / folder / f"{name}.run")
    again = stages.context(run_dir, ctx.params)
    inputs = MODULES["metric_tables"].read_inputs(again)
    assert "gone+rerank" not in inputs.external
    MODULES["judge_pool"].run(again).save()
    MODULES["metric_tables"].run(again).save()
    assert not (run_dir / "runs_validated" / "gone.run").exists() and not (run_dir / "runs_hard" / "gone.run").exists()
    assert "gone" not in set(pd.read_csv(run_dir / "tables" / "sufficiency.csv")["system"])
    assert sorted(p.stem for p in (run_dir / "runs_validated").glob("*.run")) == sorted(
        p.stem for p in (ctx.run_dir / "runs_validated").glob("*.run"))


@pytest.mark.slow
def test_sufficiency_outcomes_add_up_to_one(results):
    _, out = results
    s = out["metric_tables"].tables["sufficiency"]
    total = s["sufficient"] + s["supporting_only"] + s["neither"]
    assert np.allclose(total, 1.0) and (s["n"] > 0).all()
