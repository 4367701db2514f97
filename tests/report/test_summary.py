"""The summary page's sentences (report.summary), each made from a table a run wrote: they follow
the data, say "not measured" in words when a table cannot support them, and never print nan."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lookalike.analysis import negatives
from lookalike.report import summary
from lookalike.judging import store as L


def test_summary_words_follow_the_data():
    def hard(methods, inside):
        return pd.DataFrame({"query_id": [f"q{i}" for i in range(len(methods))], "method": methods,
                             "in_hard": inside})

    cluster = hard(["cluster", "cluster"], [True, "True"])
    mixed = hard(["per-axis", "per-axis", "cluster", "template"], [True, True, True, False])
    assert "one fact" not in summary.hard_words(cluster) and "appearance" in summary.hard_words(cluster)
    assert "for 2 questions pages of its own template" in summary.hard_words(mixed) and "for 1 questions its nearest" \
        in summary.hard_words(mixed) and "every other page" not in summary.hard_words(mixed)
    # look-alikes found, none of them in a hard set larger than 5: never "none were found"
    assert "none is scored here" in summary.hard_words(hard(["template"], [False]))
    head = pd.DataFrame({"system": ["a", "b"], "sufficient@5": ["1.00 [1.00, 1.00]"] * 2,
                         "sufficient@1": ["0.50 [0.30, 0.70]", "1.00 [1.00, 1.00]"]})
    note = summary.ceiling_note(head)
    assert note.startswith("sufficient@5: cannot separate the systems") and "sufficient@1" not in note
    current = pd.DataFrame({"source": ["model"] * 1199 + ["human"] * 44})
    # model-only labels are counted as such, never called adjudicated
    assert summary.current_labels_words(current) == ("The tables use the current labels: 44 adjudicated and 1199 "
                                                "model-only (of 1243 pairs).")
    assert summary.nouned("Top-1 against random pages; page-single n = 4; every evidence page", "image") == \
        "Top-1 against random images; page-single n = 4; every evidence image"


def test_planner_words_say_not_measured_when_no_pair_varies():
    plan = pd.DataFrame([{"measure": "sufficient@5 (hard)", "system": "a", "minus": "b", "n": 12, "difference": 0.0,
                          "se": 0.0, "resolvable": 0.0, "n_needed": np.inf}])
    assert summary.planner_words(plan, None).startswith("Not measured: with 12 validated questions")
    assert summary.planner_words(plan.iloc[:0], None) == ""


def _ladder(random_top1, hard_top1):
    ps = [0.0, 0.25, 0.5, 0.75, 1.0]
    return pd.DataFrame([{"negatives": negs, "p": p, "top1": v}
                         for negs, values in (("random", random_top1), ("hard", hard_top1))
                         for p, v in zip(ps, values)])


def test_ladder_words_follow_the_slopes_they_are_given():
    flat = _ladder([0.9] * 5, [0.1, 0.3, 0.5, 0.7, 0.9])
    said = summary.ladder_words(flat, negatives.ladder_slopes(flat))
    assert "cannot tell them apart" in said and "+0.80" in said
    moving = _ladder([0.1, 0.3, 0.5, 0.7, 0.9], [0.1, 0.3, 0.5, 0.7, 0.9])
    assert "still moves with p (slope +0.80)" in summary.ladder_words(moving, negatives.ladder_slopes(moving))
    # one rung unmeasured (a CSV cell read back as ''): the slope and the level both leave it out
    gap = _ladder([0.9, "", 0.9, 0.9, 0.9], [0.1, 0.3, 0.5, 0.7, 0.9])
    assert "every one of them scores 0.90" in summary.ladder_words(gap, negatives.ladder_slopes(gap))
    unmeasured = _ladder([0.9, "", "", "", ""], [0.1, 0.3, 0.5, 0.7, 0.9])
    said = summary.ladder_words(unmeasured, negatives.ladder_slopes(unmeasured))
    assert said.startswith("The validity ladder was not measured") and "nan" not in said


def test_harder_words_read_csv_text_and_say_not_measured():
    table = pd.DataFrame({"system": ["ocr-bm25", "image"], "n": ["40", ""], "difference": ["0.3", ""],
                          "difference_lo": ["0.1", ""], "difference_hi": ["0.5", ""], "harder": ["True", ""],
                          "method": ["template axes", "template axes"]})
    said = summary.harder_words(table)
    assert said.startswith("Distractor method: template axes.")
    assert "ocr-bm25: measurably harder (top-1 random − hard +0.30 [+0.10, +0.50], n = 40)" in said
    assert "image: not measured" in said and "nan" not in said


def test_flagged_words_say_whether_the_judges_agreement_with_people_was_measured():
    validation = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "flagged_by": ["answer-string", "", "answer-string"]})
    unmeasured = summary.flagged_words(validation, pd.DataFrame())
    assert unmeasured.startswith("2 of 3 questions flagged by answer-string") and "not measured yet" in unmeasured
    agreement = pd.DataFrame([{"model": "answer-string", "adjudicator": "human", "kappa": "0.41", "kappa_lo": "0.2",
                               "kappa_hi": "0.6", "n": "30"}])
    assert "kappa 0.41 [0.20, 0.60] over 30 pairs" in summary.flagged_words(validation, agreement)
    assert summary.flagged_words(validation.drop(columns="flagged_by"), agreement) == ""


def test_kappa_over_says_the_pairs_once():
    """Seen on a filings benchmark: 'raw agreement 0.98 over 470 pairs over 470 pairs'."""
    undefined = {"kappa": "", "kappa_lo": "", "kappa_hi": "", "agreement": 0.98, "n": 470}
    assert summary.kappa_over(undefined).count("over 470 pairs") == 1
    assert summary.kappa_over({"kappa": 0.5, "kappa_lo": 0.4, "kappa_hi": 0.6, "n": 80}) == "kappa 0.50 [0.40, 0.60] over 80 pairs"


def test_the_people_who_labelled_are_on_the_summary():
    """Inter-annotator agreement (kappa with its interval, or why it is undefined) and the judge door's
    people row, read from stage 06's tables as a CSV gives them back (text cells)."""
    agreement = pd.DataFrame([
        {"scope": "people, overall (blind pool)", "first": "people", "second": "people", "n": "19", "agreement": "0.84",
         "kappa": "0.61", "kappa_lo": "0.35", "kappa_hi": "0.82", "statistic": "fleiss", "why": ""},
        {"scope": "people, pair of annotators (blind pool)", "first": "a", "second": "b", "n": "19", "agreement": "0.84",
         "kappa": "0.61", "kappa_lo": "0.35", "kappa_hi": "0.82", "statistic": "cohen", "why": ""},
        {"scope": "model vs people", "first": "answer-string", "second": "people", "n": "12", "agreement": "1.0",
         "kappa": "", "kappa_lo": "", "kappa_hi": "", "statistic": "cohen", "why": "one label throughout"}])
    door = pd.DataFrame([{"judge": "answer-string", "n_pairs": 5, "share_blind": 0.0},
                         {"judge": "people (2 blind, 2 seeing file name and caption; ...)", "n_pairs": "19",
                          "gained": "7", "lost": "0", "share_blind": "0.1", "share_blind_lo": "0.0",
                          "share_blind_hi": "0.2", "share_with_metadata": "0.28", "share_with_metadata_lo": "0.15",
                          "share_with_metadata_hi": "0.4", "difference": "0.18", "difference_lo": "0.05",
                          "difference_hi": "0.3"}])
    text = summary.people_words(agreement, door)
    assert text.startswith("People, overall (blind pool): kappa 0.61 [0.35, 0.82] over 19 pairs, raw agreement 0.84")
    assert "pair of annotators" not in text
    assert "model vs people: kappa undefined" in text and "raw agreement 1.00 over 12 pairs" in text
    assert ("the judge door with people: relevant 0.10 [0.00, 0.20] of pairs blind, 0.28 [0.15, 0.40] with file name "
            "and caption, difference +0.18 [+0.05, +0.30] over 19 pairs (7 gained, 0 lost)") in text
    assert summary.people_words(agreement.head(0), door.head(1)) == ""


def test_planner_words_name_the_interval_once():
    """Read on a photo shape: "(95%, bootstrap 95%, questions resampled, ...)" said the level twice."""
    plan = pd.DataFrame([{"measure": "sufficient@5 (hard)", "system": "a", "minus": "b", "n": 12, "difference": 0.1,
                          "se": 0.05, "resolvable": 0.14, "n_needed": 40.0}])
    said = summary.planner_words(plan, None)
    assert "(median over the 1 pair with any variance; bootstrap 95%, questions resampled, one comparison" in said
    assert said.count("95%") == 1


def test_provenance_says_what_the_labels_rest_on_and_flags_unverified_ones():
    cur = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "unit_id": ["u", "u", "u"],
                        "label": ["sufficient", "irrelevant", "supporting"],
                        "judge": ["answer-string", "answer-string", "ana"], "source": ["model", "model", "human"]})
    said, unverified = L.provenance(cur)
    assert unverified and said == ("labels: 1 by people (ana); 2 model-only (answer-string) of 3 pairs. "
                                   "Unverified labels: answer-string, agreement with people not measured")
    measured = pd.DataFrame({"model": ["answer-string"], "adjudicator": ["human"], "n": [10], "kappa": [0.4]})
    said, unverified = L.provenance(cur, measured)
    assert not unverified and "Unverified" not in said
    ref = pd.DataFrame({"model": ["answer-string"], "adjudicator": ["reference"], "n": [10], "kappa": [0.1]})
    assert L.provenance(cur, ref)[1]                      # agreement with the answer key is not agreement with people
    demo = cur.assign(source="reference", judge="reference")
    assert L.provenance(demo) == ("labels: 3 from the demo's answer key of 3 pairs", False)


def test_the_macro_evidence_table_counts_structures_and_questions_apart():
    """A Macro row's n is the evidence structures it averages: shown as a bare n it read "1" beside
    "n = 14 questions" on a corpus with one structure."""
    rows = []
    for system in ("a", "b"):
        for agg, n in (("macro", 1), ("micro", 14), ("structure", 14)):
            for measure in ("Recall", "RecallAll"):
                for k in (5, 10):
                    rows.append({"system": system, "aggregate": agg, "evidence_structure":
                                 "page-single" if agg == "structure" else "all", "measure": measure, "k": k,
                                 "value": 0.5, "value_lo": 0.25, "value_hi": 0.75, "n": n})
    wide = summary.evidence_macro(pd.DataFrame(rows))
    assert list(wide.columns[:3]) == ["system", "questions", "structures"] and "n" not in wide.columns
    assert wide["structures"].tolist() == [1, 1] and wide["questions"].tolist() == [14, 14]
    assert summary.evidence_macro(pd.DataFrame(rows).iloc[:0]).empty


def test_labels_that_came_with_the_corpus_are_called_that_not_people_s_adjudication():
    """'Pre-labels … adjudicated by human; 44 adjudicated' where no person adjudicated (the labels came with
    the corpus's qrels)."""
    import pandas as pd

    from lookalike.report import summary
    from lookalike.stages.judge_pool import adjudicated_words

    current = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "unit_id": ["a", "b", "c"],
                            "source": ["human", "human", "model"], "judge": ["qrels:q.qrels", "qrels:q.qrels", "answer-string"],
                            "adjudicated": [True, True, False], "label": ["sufficient", "irrelevant", "supporting"]})
    said, _ = summary.labels_provenance(current)
    assert said.startswith("labels: 2 that came with the corpus (qrels:q.qrels); 1 model-only") and "by people" not in said
    agreement = pd.DataFrame({"model": ["answer-string"], "adjudicator": ["human"], "n": [2], "kappa": [0.5],
                              "kappa_lo": [0.1], "kappa_hi": [0.9], "agreement": [0.75]})
    made = summary.labels_made_words(agreement, current)
    assert "compared with the judgements that came with the corpus (no person adjudicated here)" in made
    assert "adjudicated by human" not in made
    assert adjudicated_words(current) == "2 judged by the judgements that came with the corpus (none adjudicated here)"


def test_no_hardness_statistic_about_a_system_at_chance():
    """'ocr-bm25: not measurably harder (top-1 random − hard +0.08 [+0.00, +0.25])' was said of systems whose
    top-1 against random photos held chance: only that they are at chance is said."""
    import pandas as pd

    from lookalike.report import summary

    hard = pd.DataFrame({"system": ["ocr-bm25", "caption-minilm"], "n": [12, 12], "difference": [0.08, 0.3],
                         "difference_lo": [0.0, 0.1], "difference_hi": [0.25, 0.5], "harder": [False, True],
                         "method": ["appearance clustering", "appearance clustering"]})
    top1 = pd.DataFrame({"system": ["ocr-bm25", "caption-minilm"], "n": [12, 12], "top1": [0.08, 0.7],
                         "top1_lo": [0.0, 0.45], "top1_hi": [0.25, 0.9], "chance": [0.25, 0.25]})
    said = summary.harder_words(hard, top1)
    assert "ocr-bm25: at chance under random negatives (top-1 0.08 [0.00, 0.25], chance 0.25)" in said
    assert "ocr-bm25: not measurably harder" not in said and "caption-minilm: measurably harder" in said
    assert "ocr-bm25: not measurably harder" in summary.harder_words(hard)          # without the chance table
