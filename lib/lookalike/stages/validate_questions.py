"""Stage 05 · validate the questions: gold first, then every hard distractor in the gold's place;
repair by qualifier, the any-acceptable slice, the dropped; agreement of two judges; top-1 on the
validated set; the regression slice. Writes tables/question_validation.csv, questions_validated.csv.
"""

from __future__ import annotations

from pathlib import Path

from typing import Any

import numpy as np
import pandas as pd
from lookalike.judging import agreement
from lookalike.report import summary
from lookalike.judging import judges
from lookalike.analysis import negatives as N
from lookalike import params
from lookalike.analysis import cleaning as QC
from lookalike.analysis import questions as Q
from lookalike.eval import ranking, stats
from lookalike.retrieval import systems
from lookalike.io.cache import Cache
from lookalike.retrieval.encoders.base import Vectors

from lookalike.report import charts, images
from lookalike.data import demo
from lookalike.io import inputs
from lookalike.stages.base import Section, StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

STAGE = "05_validate_questions"
TITLE = 'Question validation'


def run(ctx: StageContext) -> StageResult:
    """Stage 05, in the order its notebook shows them: setup, cleaning, validation, shares, shares_chart,
    repairs, caught, agreement, top1, top1_chart, regressions, then the headline. Reads and writes what
    lookalike.stages.contracts.CONTRACTS["05_validate_questions"] declares."""
    cfg, res = ctx.config, ctx.result(STAGE, TITLE)
    units, read = ctx.units(), ctx.table
    questions, distractors = read("questions"), read("distractors")
    view, judge, second = make_judges(ctx, units)
    settings = dict(ctx.encoder_settings(), run_dir=ctx.run_dir)
    pixel = systems.pixel_systems(ctx.run_dir, cfg.encode.encoders)
    res.add(*setup_section(judge, second, cfg.validate.compare_judge))
    questions = res.add(*cleaning_section(questions, cfg.questions.clean))
    validation, validated, judgements, tally = res.add(*validation_section(
        questions, distractors, judge, view, units, cfg.validate.max_repairs, cfg.corpus.source != "demo"))
    shares = res.add(*shares_section(tally, judge, validation))
    res.add(*shares_chart_section(shares, judge))
    res.add(*repairs_section(validation))
    res.add(*caught_section(judgements, questions, units, ctx.run_dir))
    agreement_table = res.add(*agreement_section(judgements, second, questions, view, judge))
    unit_vectors, top1_validated = res.add(*top1_section(
        validated, distractors, units, read("top1_negatives"), pixel, settings, ctx.clusters, cfg.seed, ctx.run_dir))
    res.add(*top1_chart_section(top1_validated))
    res.add(*regressions_section(params.repo_path(cfg.validate.regressions), units, pixel, unit_vectors, settings,
                                 cfg.negatives, cfg.corpus.page_base, ctx.clusters, cfg.seed, ctx.run_dir))
    res.add(*headline_section(shares, agreement_table, validation, validated, judge))
    return res


def make_judges(ctx: StageContext, units: pd.DataFrame):
    """Stage 05's judges and what they read: the page view (OCR text through the cache) and the primary and
    second judge, built from the validate.* and judges.* settings with the demo's answer key when present."""
    cfg, read = ctx.config, ctx.table
    facts, answer_key = read("facts"), read("answer_key")
    cache = Cache(cfg.encode.cache_dir or None)
    texts = systems.ocr_texts(units, ctx.run_dir, cache, cfg.encode.ocr_engine, cfg.encode.workers,
                               text_source=cfg.encode.text_source)
    view = judges.unit_viewer(units, texts, ctx.run_dir)
    v = cfg.validate
    judge_args = dict(facts=facts, answer_key=answer_key, units=units, regions=demo.REGIONS,
                      labels=str(params.repo_path(v.labels) or ""),
                      page_base=cfg.corpus.page_base, **ctx.judge_settings(cache.root))
    judge = judges.make_judge(v.judge, **judge_args)
    return view, judge, judges.second_judge(judge, v.compare_judge, **judge_args)


def setup_section(judge, second, compare_judge: str) -> tuple[Section]:
    """Who validates: the primary judge and the second one (never the primary judge compared with itself)."""
    sec = Section(STAGE, "setup")
    sec.say(f"primary judge: {judge.name}" + (" (the demo's answer key)" if judge.name == "reference" else ""))
    sec.say(f"second judge: {second.name if second else 'none'}"
            + (" (validate.compare_judge names the primary judge; a judge is never compared with itself)"
               if second is None and compare_judge not in ("", "none") else ""))
    return (sec,)


def cleaning_section(questions: pd.DataFrame, mode: str) -> tuple[Section, pd.DataFrame]:
    """Query cleaning: the questions flagged by each rule and what the rule means. Writes
    question_cleaning, question_cleaning_summary."""
    sec = Section(STAGE, "cleaning")
    n_generated = len(questions)
    questions, cleaning, cleaning_summary = QC.clean(questions, mode)
    flagged = cleaning["query_id"].nunique()
    sec.say(f"query cleaning ({mode}): {flagged} of {n_generated} questions flagged"
            + (f"; {flagged} left out of validation (tables/question_cleaning.csv lists each)"
               if mode == "drop" and flagged else ""))
    with pd.option_context("display.float_format", "{:.3f}".format, "display.max_colwidth", 90):
        sec.say(cleaning_summary.to_string(index=False))
    for rule, meaning in QC.RULE_MEANINGS.items():
        sec.say(f"  {rule}: {meaning}")
    sec.table("question_cleaning", cleaning, sort_by=["query_id", "rule"])
    sec.table("question_cleaning_summary", cleaning_summary)
    return sec, questions


def validation_section(questions: pd.DataFrame, distractors: pd.DataFrame, judge, view, units: pd.DataFrame,
                       max_repairs: int, gold_from_people: bool) -> tuple[Section, pd.DataFrame, pd.DataFrame,
                                                                          pd.DataFrame, pd.DataFrame]:
    """Question validation: each question against its gold and distractors (sufficient on the gold, not
    on a distractor), repaired when it can be; the validated set. Writes question_validation,
    questions_validated, validation_judgements."""
    sec = Section(STAGE, "validation")
    # off the demo (gold_from_people), page-level evidence comes from judgements people made (your qrels,
    # BEIR / ViDoRe's)
    validation, validated, judgements = Q.validate(questions, distractors, judge, view, units, max_repairs,
                                                   gold_from_people=gold_from_people)
    tally = Q.tallies(validation)
    sec.say("gold pages: " + ("people's judgements (the qrels supplied); the judge checks the distractors only"
                              if gold_from_people else "the demo generator's evidence units, checked by the judge first"))
    not_answerable = int((validation["status"] == "not_answerable").sum())
    if not_answerable:
        sec.say(f"{not_answerable} questions the dataset marks as not answerable: their own slice, never scored as "
                f"retrieval failures")
    no_answer = int((validation["status"] == "no_answer").sum())
    if no_answer:
        sec.say(f"{no_answer} questions have no answer and the {judge.name} judge needs one: not validated "
                f"(skipped, not failed)")
    sec.say(f"questions: {len(validation)}; status as generated:")
    sec.say(validation["status"].value_counts().sort_index().to_string())
    sec.say("\noutcome (slice):")
    sec.say(validation["slice"].value_counts().sort_index().to_string())
    sec.say()
    sec.say(tally.to_string(index=False))
    sec.table("question_validation", validation, sort_by=["query_id"])
    sec.table("questions_validated", validated, sort_by=["query_id"])
    sec.table("validation_judgements", judgements, sort_by=["query_id", "attempt", "role", "axis", "unit_ids"])
    return sec, validation, validated, judgements, tally


def shares_section(tally, judge, validation: pd.DataFrame) -> tuple[Section, Any]:
    """The shares of questions answerable from a distractor, per axis. Writes validation_tallies."""
    sec = Section(STAGE, "shares")
    shares = []
    for r in tally.itertuples():
        ci = stats.proportion_ci(r.answerable, r.checked)
        shares.append({"axis": r.axis, "n": r.checked, "answerable": r.answerable, "share": ci.estimate,
                       "share_lo": ci.lo, "share_hi": ci.hi, "interval": ci.method, "judge": judge.name})
    shares = pd.DataFrame(shares, columns=["axis", "n", "answerable", "share", "share_lo", "share_hi", "interval",
                                           "judge"])
    shares = shares[shares["n"] > 0].reset_index(drop=True)     # a share of no questions is not a figure
    if not len(shares):
        sec.say("no question could be checked against its distractors: no shares (see the notes in "
                "tables/question_validation.csv)")
    by_structure = (validation.assign(answerable=validation["status"] == "answerable_from_distractor")
                    .groupby(["evidence_structure", "register"], sort=True)["answerable"].agg(["size", "sum", "mean"])
                    .rename(columns={"size": "n", "sum": "answerable", "mean": "share"}).reset_index())
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(shares.to_string(index=False))
        sec.say()
        sec.say(by_structure.to_string(index=False))
    sec.table("validation_tallies", shares.merge(tally.drop(columns=["checked", "answerable"]), on="axis", how="left"), sort_by=["axis"])
    return sec, shares


def shares_chart_section(shares, judge) -> tuple[Section]:
    """The chart of answerable shares."""
    sec = Section(STAGE, "shares_chart")
    sec.figure("05_answerable", charts.answerable(shares, judge.name))
    return (sec,)


def repairs_section(validation: pd.DataFrame) -> tuple[Section]:
    """The repairs: each question's qualifiers added, before and after, and where it ended."""
    sec = Section(STAGE, "repairs")
    fixed = validation[validation["repaired"]]
    for r in fixed.groupby("added_qualifiers", sort=True).head(2).itertuples():
        sec.say(f"{r.query_id} [{r.added_qualifiers}]\n  before: {r.original_text}\n  after:  {r.final_text}")
    rest = validation[validation["slice"] != "single-gold"]
    for r in rest.head(6).itertuples():
        sec.say(f"{r.query_id} -> {r.slice} ({r.final_status}, axis {r.axis or '-'}): {r.final_text}")
    return (sec,)


def caught_section(judgements: pd.DataFrame, questions: pd.DataFrame, units: pd.DataFrame,
                   run_dir: Path) -> tuple[Section]:
    """Questions a distractor also answers, with the page images side by side."""
    sec = Section(STAGE, "caught")
    caught = judgements[(judgements["attempt"] == 0) & (judgements["role"] == "distractor")
                        & (judgements["label"] == "sufficient")]
    if len(caught):
        ex = caught.iloc[0]
        qtext = questions.set_index("query_id").loc[ex["query_id"], "text"]
        sec.say(f"{ex['query_id']}: {qtext}\n  distractor axis: {ex['axis']}; it gives {ex['answer'] or 'an answer'}")
        pair = pd.DataFrame({"gold_unit_id": [ex["gold_unit_id"]], "unit_id": [ex["unit_ids"].split(";")[0]],
                             "axis": [ex["axis"]], "similarity": [np.nan]})
        sec.figure("05_caught", images.distractor_montage(ex["gold_unit_id"], pair, units, run_dir, N.MONTAGE_AXES))
    else:
        sec.say("no question was answerable from a distractor")
    return (sec,)


def agreement_section(judgements: pd.DataFrame, second, questions: pd.DataFrame, view, judge) -> tuple[Section, Any]:
    """Agreement between the primary and the second judge on validation. Writes judge_agreement."""
    sec = Section(STAGE, "agreement")
    pairs = judgements[judgements["attempt"] == 0].reset_index(drop=True)
    agreement_table = pd.DataFrame(columns=["subset", "first", "second", "n", "agreement", "kappa", "kappa_lo", "kappa_hi", "n_boundary",
                                            "kappa_boundary"])
    if second is not None and len(pairs):
        qrec = questions.set_index("query_id")
        pairs["second_label"] = [second.judge({**qrec.loc[q].to_dict(), "query_id": q}, view(ids.split(";"))).label
                                 for q, ids in zip(pairs["query_id"], pairs["unit_ids"])]
        pairs["evidence_structure"] = pairs["query_id"].map(qrec["evidence_structure"])
        # agreement is measured where both judges labelled: a pair either abstained on (it could not see what a
        # label needs: no text, no answer, a chart's drawing) is counted here and left out of every figure
        both, left_out = agreement.labelled_by_both(pairs["label"], pairs["second_label"], judge.name, second.name)
        if left_out:
            sec.say(left_out)
        pairs = pairs[both].reset_index(drop=True)
    if second is not None and len(pairs):
        subsets = {"all pairs": pairs}
        subsets.update({f"role: {k}": g for k, g in pairs.groupby("role", sort=True)})
        subsets.update({f"structure: {k}": g for k, g in pairs.groupby("evidence_structure", sort=True)})
        agreement_table = pd.DataFrame([{"subset": name, "first": judge.name, "second": second.name,
                                         **agreement.agreement(g["label"], g["second_label"])} for name, g in subsets.items()],
                                       columns=agreement_table.columns)
        with pd.option_context("display.float_format", "{:.3f}".format):
            sec.say(agreement_table.drop(columns=["first", "second"]).to_string(index=False, na_rep="undefined"))
            sec.say()
            sec.say(agreement.confusion(pairs["label"], pairs["second_label"]).to_string())
    elif second is None:
        sec.say("no second judge configured")
    else:
        sec.say(f"agreement not measured: no pair both the {judge.name} and the {second.name} judge labelled")
    sec.table("judge_agreement", agreement_table, sort_by=["subset"])
    return sec, agreement_table


def top1_section(validated: pd.DataFrame, distractors: pd.DataFrame, units: pd.DataFrame, as_generated: pd.DataFrame,
                 pixel: list, settings: dict, clusters_of, seed: int, run_dir: Path) -> tuple[Section, dict, pd.DataFrame]:
    """Top-1 of each system on the validated questions against their distractors. Writes top1_validated."""
    sec = Section(STAGE, "top1")
    single = validated[(validated["evidence_structure"] == "page-single")].reset_index(drop=True)
    names = list(pixel)
    unit_vectors = {n: Vectors.load(run_dir / "vectors" / f"{n}.npz") for n in names}
    top1_rows = []
    if len(single) and names:
        qv = systems.encode_queries(single, names, **settings)
        strict = single[single["slice"] == "single-gold"]
        gold = dict(zip(strict["query_id"], strict["evidence_unit_ids"]))
        by_gold = {axis_set: distractors[distractors["axis"].isin(axis_set)].groupby("gold_unit_id")["unit_id"]
                   .apply(list).to_dict() for axis_set in (("random",), tuple(Q.AXIS_ORDER))}
        sets = {"random": {q: by_gold[("random",)].get(g, []) for q, g in gold.items()},
                "hard": {q: by_gold[tuple(Q.AXIS_ORDER)].get(g, []) for q, g in gold.items()},
                "corpus": {q: None for q in gold}}
        unit_ids, where = list(units["unit_id"]), {q: i for i, q in enumerate(single["query_id"])}
        pos = [where[q] for q in strict["query_id"]]
        outcomes = {n: N.top1_outcomes(systems.score_rows(unit_vectors[n], qv[n], pos), unit_ids,
                                       list(strict["query_id"]), gold, sets) for n in names}
        t = N.top1_table(outcomes, unit_ids, gold, sets, seed, clusters=clusters_of(gold))
        top1_rows.append(t.assign(question_set="validated"))
        loose = single[single["slice"] == "any-acceptable"]
        if len(loose):
            pos = [where[q] for q in loose["query_id"]]
            acc = {q: set(a.split(";")) for q, a in zip(loose["query_id"], loose["acceptable_unit_ids"])}
            corpus = {"corpus": {q: None for q in acc}}
            outcomes = {n: N.top1_outcomes(systems.score_rows(unit_vectors[n], qv[n], pos), unit_ids,
                                           list(loose["query_id"]), acc, corpus) for n in names}
            t = N.top1_table(outcomes, unit_ids, acc, corpus, seed,
                             clusters=clusters_of(dict(zip(loose["query_id"], loose["evidence_unit_ids"]))))
            top1_rows.append(t.assign(question_set="any-acceptable"))
    as_generated = as_generated[as_generated["system"].isin(names)].assign(question_set="as generated")
    top1_validated = pd.concat([as_generated, *top1_rows], ignore_index=True)[
        ["question_set", "system", "negatives", "n", "top1", "top1_lo", "top1_hi"]]
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(top1_validated.to_string(index=False, na_rep="·") if len(top1_validated) else "no page-single questions to score")
    sec.html_table("top1", top1_validated)
    sec.table("top1_validated", top1_validated, sort_by=["question_set", "system", "negatives"])
    return sec, unit_vectors, top1_validated


def top1_chart_section(top1_validated) -> tuple[Section]:
    """The chart of top-1 on validated questions."""
    sec = Section(STAGE, "top1_chart")
    shown = top1_validated[top1_validated["question_set"] == "validated"]
    chart = None if shown.empty else charts.top1(
        shown, "Top-1 on validated questions: random, hard, whole corpus (own n and CI each)")
    sec.figure("05_top1_validated", chart)
    return (sec,)


def regressions_section(reg_path: Path | None, units: pd.DataFrame, names: list, unit_vectors: dict, settings: dict,
                        negatives, page_base, clusters_of, seed: int, run_dir: Path) -> tuple[Section]:
    """Failures users reported (validate.regressions, a file): each expected page's rank now, top-1 against
    its look-alikes and over the corpus, and whether the page returned instead still ranks above it. Writes
    regression_slice, regression_summary, regression_skipped."""
    sec = Section(STAGE, "regressions")
    regression_rows = pd.DataFrame(columns=["query_id", "system", "expected_rank", "top1_hard", "top1_corpus",
                                            "returned_still_above"])
    regression_summary = pd.DataFrame(columns=N.TOP1_COLUMNS)
    regression_skipped = pd.DataFrame(columns=["source", "row", "unit_id", "problem"])
    if reg_path is None:
        sec.say("no regression file configured (validate_regressions)")
    else:
        reports, regression_skipped = inputs.read_regressions(reg_path, units["unit_id"], page_base)
        regression_skipped["source"] = reg_path.name
        sec.say(f"{reg_path.name}: {len(reports)} reports kept, {len(regression_skipped)} skipped")
        if len(regression_skipped):
            sec.say(regression_skipped.to_string(index=False))
        if len(reports) and names:
            appearance = Vectors.load(run_dir / "vectors" / "appearance.npz")
            expected = sorted(set(reports["expected_unit_id"]))
            reg_hard, _ = N.look_alikes(units, appearance.data, expected, negatives.k, negatives.clusters,
                                        negatives.cluster_k, seed)
            hard_of = reg_hard.groupby("gold_unit_id")["unit_id"].apply(list).to_dict()
            rq = reports.assign(evidence_unit_ids=reports["expected_unit_id"])
            qv = systems.encode_queries(rq, names, **settings)
            gold = dict(zip(rq["query_id"], rq["expected_unit_id"]))
            sets = {"hard": {q: hard_of.get(g, []) for q, g in gold.items()}, "corpus": {q: None for q in gold}}
            # the reports a team filed: few, so each system's whole report x unit matrix is held (ranks need it)
            scores = {n: systems.score_matrix(unit_vectors[n], qv[n]) for n in names}
            outcomes = {n: N.top1_outcomes(lambda rows, m=m: m[list(rows)], list(units["unit_id"]), list(rq["query_id"]),
                                           gold, sets) for n, m in scores.items()}
            regression_summary = N.top1_table(outcomes, list(units["unit_id"]), gold, sets, seed,
                                              clusters=clusters_of(gold))
            col = {u: i for i, u in enumerate(units["unit_id"])}
            unit_ids = units["unit_id"].to_numpy(dtype=object)
            rows = []
            for n, m in scores.items():
                for i, r in enumerate(rq.itertuples()):
                    s = m[i]
                    e = s[col[r.expected_unit_id]]
                    rank = ranking.rank_of(s, unit_ids, col[r.expected_unit_id])
                    above = "" if not r.returned_unit_id else ranking.ranks_above(
                        s[col[r.returned_unit_id]], r.returned_unit_id, e, r.expected_unit_id)
                    rows.append({"query_id": r.query_id, "system": n, "expected_rank": rank,
                                 "top1_hard": outcomes[n].loc[r.query_id, "hard"],
                                 "top1_corpus": float(rank == 1), "returned_still_above": above})
            regression_rows = pd.DataFrame(rows, columns=regression_rows.columns)
            with pd.option_context("display.float_format", "{:.3f}".format):
                sec.say(regression_summary.to_string(index=False))
                sec.say()
                sec.say(regression_rows.to_string(index=False))
    sec.table("regression_slice", regression_rows, sort_by=["query_id", "system"])
    sec.table("regression_summary", regression_summary, sort_by=["system", "negatives"])
    sec.table("regression_skipped", regression_skipped, sort_by=["row"])
    return (sec,)


def headline_section(shares: pd.DataFrame, agreement_table: pd.DataFrame, validation: pd.DataFrame,
                     validated: pd.DataFrame, judge) -> tuple[Section]:
    """What index.html says of stage 05: the share answerable from a hard distractor (or that none could be
    checked), people-judged questions flagged and kept, repaired / any-acceptable / dropped, and the second
    judge's agreement."""
    sec = Section(STAGE, "headline")
    anyrow = shares[shares["axis"] == "any"]
    checked = int(anyrow["n"].iloc[0]) if len(anyrow) else 0
    kappa = (summary.kappa_over(agreement_table.iloc[0])
             if len(agreement_table) else "not measured (no second judge)")
    flagged_n = int((validation["flagged_by"] != "").sum())
    unchecked = int((validation["status"] == "no_answer").sum())
    opening = (f"{float(anyrow['share'].iloc[0]):.0%} of the {checked} questions checked (of {len(validation)}) were "
               f"answerable from a hard distractor (judge: {judge.name})" if checked else
               f"Not measured: none of the {len(validation)} questions could be checked against its distractors "
               f"(judge: {judge.name}; {unchecked} without an answer it needs)")
    sentence = (f"{opening}; "
                + (f"{flagged_n} people-judged questions flagged by {judge.name} and kept as judged; " if flagged_n else "")
                + (f"{unchecked} kept unchecked (distractor check not run: no answer); " if unchecked and checked else "")
                + f"{int(validation['repaired'].sum())} repaired, "
                f"{int((validation['slice'] == 'any-acceptable').sum())} kept as any-acceptable, "
                f"{int((validation['slice'] == 'dropped').sum())} dropped. Agreement with the second judge: {kappa}.")
    sec.headline(
        sentence,
        figure="05_answerable" if len(shares) else "",
        numbers={**{f"answerable via {a}": f"{s:.2f}" for a, s, n in zip(shares["axis"], shares["share"], shares["n"]) if n},
                 "validated questions": len(validated)},
    )
    return (sec,)



