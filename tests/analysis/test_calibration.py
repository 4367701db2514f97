"""The demo as a calibration corpus: what the generator plants, the validity ladder, the hard
candidate sets, the judge door and the planted-effects table — and, on the whole CI run, that every
planted effect is recovered (the issue's 'done when')."""

import numpy as np
import pandas as pd
import pytest
from lookalike.analysis import calibration
from lookalike.analysis import negatives
from lookalike.judging import door as JD
from lookalike.judging import judges


@pytest.fixture(scope="module")
def ci_demo(tmp_path_factory):
    from lookalike.data import demo

    return demo.generate("ci", 7, tmp_path_factory.mktemp("cal") / "corpus")


# ----------------------------------------------------------------------------- what is planted

def test_the_generator_records_what_it_planted(ci_demo):
    from lookalike.data import demo

    c = ci_demo
    planted = c.planted.set_index("effect")["planted"]
    flags = demo.under_specified(c.questions, c.units)
    assert planted["under-specified questions"] == pytest.approx(flags.mean())
    # every question that omits the entity or the period is planted as under-specified ...
    omits = c.questions["qualifiers"].map(lambda q: not {"entity", "period"} <= set(q.split(";")))
    assert flags[omits].all()
    # ... and so is a fully qualified one whose page a restatement republished
    twins = demo.restated_twins(c.units)
    assert twins and all(c.units.set_index("unit_id").loc[sorted(twins), "metric"] != "")
    assert planted["restatement pairs"] == len(twins)
    assert set(c.units.loc[c.units["revision"] == 2, "unit_id"]) - twins <= set(
        c.units.loc[c.units["template_id"] == "cover", "unit_id"])


def test_revision_pools_find_exactly_the_planted_pairs(ci_demo):
    from lookalike.data import demo

    c = ci_demo
    vectors = np.eye(len(c.units), dtype=np.float32)
    _, pools = negatives.hard_negatives(c.units, vectors, list(c.units["unit_id"]), k=1, axes=("revision",))
    assert set(pools.loc[pools["pool"] > 0, "gold_unit_id"]) == demo.restated_twins(c.units)


# ----------------------------------------------------------------------------- validity ladder

def test_validity_ladder_is_flat_under_random_negatives_and_follows_p_under_hard(ci_demo):
    c = ci_demo
    single = c.questions[c.questions["evidence_structure"] == "page-single"]
    gold = dict(zip(single["query_id"], single["evidence_unit_ids"]))
    vectors = np.eye(len(c.units), dtype=np.float32)
    hard, _ = negatives.hard_negatives(c.units, vectors, sorted(set(gold.values())), k=3)
    rand = negatives.random_negatives(c.units, sorted(set(gold.values())), 9, seed=7)
    by = lambda d: d.groupby("gold_unit_id")["unit_id"].apply(list).to_dict()  # noqa: E731
    sets = {"random": {q: by(rand).get(g, []) for q, g in gold.items()},
            "hard": {q: by(hard).get(g, []) for q, g in gold.items()}}
    ladder = negatives.validity_ladder(c.units, gold, sets, seed=7, n_boot=300)
    assert list(ladder.columns[:6]) == ["p", "negatives", "n", "top1", "top1_lo", "top1_hi"]
    assert sorted(set(ladder["p"])) == [0.0, 0.25, 0.5, 0.75, 1.0]
    slopes = negatives.ladder_slopes(ladder)
    assert abs(slopes["random"]) <= 0.1 and slopes["hard"] > 0.5
    hard_rows = ladder[ladder["negatives"] == "hard"].sort_values("p")
    assert hard_rows["top1"].is_monotonic_increasing              # the rungs share their draws
    assert hard_rows["top1"].iloc[0] == 0.0 and hard_rows["top1"].iloc[-1] == 1.0
    assert (ladder["top1_lo"] <= ladder["top1"]).all() and (ladder["top1"] <= ladder["top1_hi"]).all()


def test_hard_candidates_hold_every_look_alike_of_the_gold(ci_demo):
    c = ci_demo
    q = c.questions[c.questions["evidence_structure"] == "page-single"].head(5)
    empty = pd.DataFrame(columns=["query_id", "gold_unit_id", "unit_id", "axis", "similarity"])
    cands = negatives.hard_candidates(q, empty, c.units)
    template = c.units.set_index("unit_id")["template_id"]
    for qid, gold in zip(q["query_id"], q["evidence_unit_ids"]):
        same = set(c.units.loc[c.units["template_id"] == template[gold], "unit_id"])
        assert cands[qid][0] == gold and set(cands[qid]) == same and len(cands[qid]) == len(same)


# ----------------------------------------------------------------------------- judge door

def _door_case():
    """Two pooled pairs of one question: a:1's file name and caption name the asked entity and metric."""
    units = pd.DataFrame({"unit_id": ["a:1", "b:1"], "filename": ["halvorsen_energy_revenue.png", "IMG_1.png"],
                          "caption": ["Halvorsen Energy operating income", ""], "entity": ["Halvorsen Energy", "X"],
                          "metric": ["operating_income", "revenue"]})
    questions = pd.DataFrame({"query_id": ["q1"], "text": ["What was Halvorsen Energy's operating income?"],
                              "answer": ["$9M"]})
    pairs = pd.DataFrame({"query_id": ["q1", "q1"], "unit_id": ["a:1", "b:1"]})
    return units, questions, pairs


def test_judge_door_sees_a_judge_that_metadata_moves():
    units, questions, pairs = _door_case()
    view = lambda ids: {"unit_id": ids[0], "unit_ids": ids, "text": "Risk factors"}  # noqa: E731
    judge = judges.AnswerStringJudge.from_resources(units=units)
    per_pair, summary = JD.judge_door(judge, pairs, questions, view, units)
    assert list(per_pair["gained"]) == [True, False] and list(per_pair["term_in_metadata"]) == [True, False]
    s = summary.iloc[0]
    assert (s["relevant_blind"], s["relevant_with_metadata"], s["gained"]) == (0, 1, 1)
    assert s["gained_with_term"] == 1.0 and s["others_with_term"] == 0.0


def test_judge_door_reuses_blind_labels_it_is_given_and_refuses_labels_of_other_pairs():
    units, questions, pairs = _door_case()
    view = judges.unit_viewer(units.assign(image_path=["a.png", "b.png"]), {"a:1": "Risk factors", "b:1": ""})
    judge = judges.AnswerStringJudge.from_resources(units=units)
    blind = judges.label_pairs(judge, pairs, questions, view)
    fresh = JD.judge_door(judge, pairs, questions, view, units)
    reused = JD.judge_door(judge, pairs, questions, view, units, blind=blind)
    assert fresh[0].equals(reused[0]) and fresh[1].equals(reused[1])
    # b:1 has no text: the judge abstained on it blind, so the door labels both pairs itself
    assert len(blind) == 1 and blind.attrs["abstained"]
    with pytest.raises(ValueError, match="not of these pairs"):
        JD.judge_door(judge, pairs, questions, view, units, blind=blind.assign(unit_id="c:1"))
    whole = judges.label_pairs(judge, pairs, questions, view, keep_abstained=True)
    with pytest.raises(ValueError, match="not of these pairs"):
        JD.judge_door(judge, pairs, questions, view, units, blind=whole.iloc[::-1].reset_index(drop=True))


# ----------------------------------------------------------------------------- planted effects

def _inputs(**over):
    planted = pd.DataFrame([
        ("under-specified questions", "0.30", "m"), ("restatement pairs", "12", "m"),
        ("leaky pixel system", "LEAK", "m"), ("caption index: caption-derived / blind recall@10", "2", "m"),
        ("image index: caption-derived − blind recall@10", "0", "m"),
        ("judge door: relevant labels gained with metadata visible", "more", "m"),
        ("validity ladder: slope under random negatives", "0", "m"),
        ("validity ladder: slope under hard negatives", "1", "m")], columns=["effect", "planted", "meaning"])
    validation = pd.DataFrame({"query_id": [f"q{i}" for i in range(10)],
                               "status": ["answerable_from_distractor"] * 3 + ["ok"] * 7})
    gate = pd.DataFrame({"system": ["image"], "n_pairs": [10], "difference": [0.01], "difference_lo": [-0.1],
                         "difference_hi": [0.12]})
    leak_planted = pd.DataFrame({"system": ["image", "image+filename"], "verdict": ["PASS", "LEAK"]})
    per_query = pd.DataFrame({"index": "caption", "unit_id": [f"u{i}" for i in range(10) for _ in (0, 1)],
                              "query_set": ["blind", "caption-derived"] * 10,
                              "recall_10": [0.0, 1.0] * 7 + [1.0, 1.0] * 3})
    door = pd.DataFrame([{"judge": "answer-string", "n_pairs": 100, "relevant_blind": 20, "relevant_with_metadata": 35,
                          "gained": 15, "lost": 0, "gained_with_term": 0.9, "gained_with_term_lo": 0.7,
                          "gained_with_term_hi": 0.97, "others_with_term": 0.3, "others_with_term_lo": 0.2,
                          "others_with_term_hi": 0.4}])
    args = dict(validation=validation, revision_pool_units=12, leak_gate=gate, leak_planted=leak_planted,
                leak_per_query=per_query, door_summary=door, ladder_slopes={"random": 0.02, "hard": 0.96})
    args.update(over)
    return planted, args


def test_planted_effects_all_ok_when_everything_is_recovered():
    planted, args = _inputs()
    effects = calibration.planted_effects(planted, **args)
    assert list(effects.columns[:6]) == ["effect", "planted", "recovered", "lo", "hi", "ok"]
    assert len(effects) == 8 and effects["ok"].all(), effects
    ratio = effects.set_index("effect").loc["caption index: caption-derived / blind recall@10"]
    assert ratio["recovered"] == pytest.approx(10 / 3) and ratio["lo"] <= ratio["recovered"] <= ratio["hi"]


@pytest.mark.parametrize("change, effect", [
    (dict(validation=pd.DataFrame({"query_id": [f"q{i}" for i in range(10)], "status": ["ok"] * 10})),
     "under-specified questions"),
    (dict(revision_pool_units=11), "restatement pairs"),
    (dict(leak_planted=pd.DataFrame({"system": ["image", "image+filename"], "verdict": ["PASS", "PASS"]})),
     "leaky pixel system"),
    (dict(leak_planted=pd.DataFrame({"system": ["image", "image+filename"], "verdict": ["LEAK", "LEAK"]})),
     "leaky pixel system"),
    (dict(leak_gate=pd.DataFrame({"system": ["image"], "n_pairs": [10], "difference": [0.2], "difference_lo": [0.1],
                                  "difference_hi": [0.3]})), "image index: caption-derived − blind recall@10"),
    (dict(ladder_slopes={"random": 0.3, "hard": 0.96}), "validity ladder: slope under random negatives"),
    (dict(ladder_slopes={"random": 0.0, "hard": 0.2}), "validity ladder: slope under hard negatives"),
])
def test_planted_effects_fail_when_the_instrument_misses_one(change, effect):
    planted, args = _inputs(**change)
    effects = calibration.planted_effects(planted, **args).set_index("effect")
    assert not effects.loc[effect, "ok"]
    assert effects.drop(index=effect)["ok"].all()


# ----------------------------------------------------------------------------- the CI run

def test_ci_run_recovers_every_planted_effect(ci_run):
    t = lambda name: pd.read_csv(ci_run / "tables" / f"{name}.csv", keep_default_na=False)  # noqa: E731
    effects = t("planted_effects")
    assert len(effects) == len(t("planted")) and effects["ok"].map(lambda v: str(v) == "True").all(), effects
    ladder = t("validity_ladder")
    assert list(ladder.columns[:6]) == ["p", "negatives", "n", "top1", "top1_lo", "top1_hi"]
    slopes = negatives.ladder_slopes(ladder)
    assert abs(slopes["random"]) <= 0.1 and slopes["hard"] > 0.5
    sig = t("significance")
    hard = sig[sig["measure"] == "sufficient@5 (hard)"]
    assert (pd.to_numeric(hard["p_holm"], errors="coerce") < 0.05).any(), hard
    suff = t("sufficiency")
    assert (suff["supporting_only"].astype(float) > 0).any()
    summary = (ci_run / "summary.html").read_text(encoding="utf-8")
    assert "validity ladder" in summary and "Calibration: what the demo planted" in summary
