"""Stage 08 · mined candidates are not negatives until judged: a retriever's top non-gold
candidates judged; incompleteness with CIs; negative-selection rules at an equal count and their
contamination; agreement of two judges; score shape; hard-negative training files.
"""

from __future__ import annotations

from pathlib import Path

from typing import Any

import pandas as pd
from lookalike import progress as bars
from lookalike.judging import agreement
from lookalike.judging import judges
from lookalike.judging.protocol import ABSTAIN
from lookalike.judging import store
from lookalike.analysis import mining
from lookalike.retrieval import systems
from lookalike.eval import trec
from lookalike.io.cache import Cache

from lookalike.report import charts
from lookalike.report import summary
from lookalike.data import demo
from lookalike.stages.base import Section, StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

STAGE = "08_mined_candidates"
TITLE = 'Mined candidates'


def run(ctx: StageContext) -> StageResult:
    """Stage 08, in the order its notebook shows them: setup, mined, incompleteness, rules, rules_chart,
    agreement, score_shape. Reads and writes what lookalike.stages.contracts.CONTRACTS["08_mined_candidates"]
    declares."""
    cfg, res = ctx.config, ctx.result(STAGE, TITLE)
    m = cfg.mining
    units = ctx.units()
    question_sets, runs = read_question_sets(ctx, m.question_set, m.retriever)
    view, judge, second = make_judges(ctx, units)
    res.add(*setup_section(question_sets, m.retriever, judge, second, m.compare_judge))
    rules, mined_all, chosen_all, golds, judgements = res.add(*mined_section(
        view, m.windows, m.alphas, question_sets, runs, m.depth, m.judge_top, judge, m.negatives, cfg.seed, second))
    set_clusters, incompleteness = res.add(*incompleteness_section(
        golds, ctx.clusters, question_sets, units, mined_all, judgements, cfg.seed))
    rules_by_judge, negative_rules = res.add(*rules_section(judgements, chosen_all, cfg.seed, set_clusters,
                                                            m.question_set, judge, second))
    res.add(*rules_chart_section(rules_by_judge, m.question_set, rules))
    res.add(*agreement_section(second, judgements, judge))
    res.add(*score_shape_section(judgements, question_sets, m.question_set, judge, chosen_all, golds, units,
                                 ctx.run_dir, incompleteness, negative_rules, second,
                                 ctx.optional_table("label_agreement")))
    return res


def read_question_sets(ctx: StageContext, question_set: str, retriever: str) -> tuple[dict, dict]:
    """The two question sets mining can start from, each with the folder of its runs (as generated, with page
    evidence: runs/; validated single-gold: runs_validated/), and the miner's run for each."""
    read, run_dir = ctx.table, ctx.run_dir
    validated = read("questions_validated")
    as_generated = read("questions")
    as_generated = as_generated[as_generated["evidence_unit_ids"] != ""].reset_index(drop=True)  # page evidence only
    sets = {"generated": (as_generated, run_dir / "runs"), "validated": (
        validated[validated["slice"] == "single-gold"].reset_index(drop=True), run_dir / "runs_validated")}
    if question_set not in sets:
        raise ValueError(f"mining_question_set must be one of {sorted(sets)}, got {question_set!r}")
    runs = {}
    for name, (qs, folder) in sets.items():
        path = folder / f"{retriever}.run"
        if len(qs) and not path.is_file():
            raise FileNotFoundError(f"{path} is missing: mining.retriever must be a system stages 02 and 06 ranked "
                                    f"({', '.join(p.stem for p in sorted(folder.glob('*.run')))})")
        runs[name] = trec.read_run_file(path)[0] if len(qs) else pd.DataFrame(columns=["query_id", "unit_id", "score"])
    return sets, runs


def make_judges(ctx: StageContext, units: pd.DataFrame):
    """Stage 08's judges and what they read: the page view (OCR text through the cache), mining.judge and
    mining.compare_judge at the judge endpoint (the demo's answer key when present)."""
    cfg, read = ctx.config, ctx.table
    cache = Cache(cfg.encode.cache_dir or None)
    texts = systems.ocr_texts(units, ctx.run_dir, cache, cfg.encode.ocr_engine, cfg.encode.workers,
                               text_source=cfg.encode.text_source)
    view = judges.unit_viewer(units, texts, ctx.run_dir)
    jargs = dict(facts=read("facts"), answer_key=read("answer_key"), units=units, regions=demo.REGIONS,
                 **ctx.judge_settings(cache.root))
    judge = judges.make_judge(cfg.mining.judge, **jargs)
    return view, judge, judges.second_judge(judge, cfg.mining.compare_judge, **jargs)


def setup_section(question_sets: dict, retriever: str, judge, second, compare_judge: str) -> tuple[Section]:
    """What stage 08 mines from: the question sets (as generated, validated), the miner, the judge and the
    second judge (never the judge compared with itself)."""
    sec = Section(STAGE, "setup")
    sec.say(f"questions as generated: {len(question_sets['generated'][0])}, validated: "
            f"{len(question_sets['validated'][0])}; miner: {retriever}; judge: {judge.name}"
            + (" (the demo's answer key)" if judge.name == "reference" else "")
            + f"; second judge: {second.name if second else 'none'}"
            + (" (mining.compare_judge names the primary judge; a judge is never compared with itself)"
               if second is None and compare_judge not in ("", "none") else ""))
    return (sec,)


def mined_section(view, mining_windows, mining_alphas, question_sets, runs, mining_depth, mining_judge_top, judge,
                  mining_negatives, seed: int, second) -> tuple[Section, Any, Any, Any, Any, Any]:
    """Mined candidates per question set: each miner's top mining.depth judged by the judge, and the
    negatives each rule picks. Writes mined_candidates, mined_judgements, negatives_chosen."""
    sec = Section(STAGE, "mined")
    memo = judges.Memo(view)
    rules = (["top-k"] + [f"window:{w}" for w in mining_windows] + [f"topk-percpos:{a:g}" for a in mining_alphas]
             + ["judged"])
    mined_all, chosen_all, judgements_all, golds = [], [], [], {}
    for set_name, (qs, _) in question_sets.items():
        qrec = qs.set_index("query_id")
        gold = {q: [u for u in ev.split(";") if u] for q, ev in zip(qs["query_id"], qs["evidence_unit_ids"])}
        golds[set_name] = gold
        mined = mining.mine(runs[set_name], {q: set(g) for q, g in gold.items()}, n=mining_depth)
        budget = mined[mined["rank"] <= mining_judge_top]
        budget_labels = budget[["query_id", "unit_id"]].assign(
            label=[memo.label(judge, qrec, q, u) for q, u in bars.bar(
                zip(budget["query_id"], budget["unit_id"]), total=len(budget), desc=f"judging mined ({judge.name})",
                unit="pair")])
        chosen = (pd.concat([mining.select(mined, r, k=mining_negatives, judged_labels=budget_labels, seed=seed) for r in rules],
                            ignore_index=True) if len(mined) else pd.DataFrame(columns=mining.CHOSEN_COLUMNS))
        need = pd.concat([budget[["query_id", "unit_id"]], chosen[["query_id", "unit_id"]]]).drop_duplicates()
        for j in [judge] + ([second] if second else []):
            judgements_all.append(need.assign(judge=j.name, question_set=set_name, in_budget=need.merge(
                budget[["query_id", "unit_id"]], how="left", indicator=True)["_merge"].eq("both").to_numpy(),
                label=[memo.label(j, qrec, q, u) for q, u in zip(need["query_id"], need["unit_id"])],
                abstained=[memo.abstained_because(j, qrec, q, u) for q, u in zip(need["query_id"], need["unit_id"])]))
        mined_all.append(mined.assign(question_set=set_name))
        chosen_all.append(chosen.assign(question_set=set_name))
        sec.say(f"{set_name}: {len(mined)} candidates for {mined['query_id'].nunique()} questions; "
              f"judged pairs per judge: {len(need)}")
    mined_all = pd.concat(mined_all, ignore_index=True)
    chosen_all = pd.concat(chosen_all, ignore_index=True)
    judgements = pd.concat(judgements_all, ignore_index=True)
    by_window = (judgements[judgements["judge"] == judge.name]
                 .merge(mined_all[["question_set", "query_id", "unit_id", "rank"]], on=["question_set", "query_id", "unit_id"])
                 .assign(window=lambda d: pd.cut(d["rank"], [0, 1, 4, 20, 100], labels=["1", "2-4", "5-20", "21-100"])))
    sec.say(f"\nshare judged relevant by mined rank (judge: {judge.name}):")
    sec.say(by_window.groupby(["question_set", "window"], observed=False)["label"].apply(
        lambda s: f"{mining.is_relevant(s).mean():.3f} of {len(s)}" if len(s) else "none mined").unstack(0).to_string(na_rep="·") if len(by_window) else "nothing mined")
    sec.table("mined_candidates", mined_all, sort_by=["question_set", "query_id", "rank"])
    sec.table("mined_judgements", judgements, sort_by=["question_set", "judge", "query_id", "unit_id"])
    sec.table("negatives_chosen", chosen_all, sort_by=["question_set", "rule", "query_id", "rank"])
    return sec, rules, mined_all, chosen_all, golds, judgements


def incompleteness_section(golds, clusters_of, question_sets, units: pd.DataFrame, mined_all, judgements: pd.DataFrame,
                           seed: int) -> tuple[Section, Any, Any]:
    """How incomplete the judged pool is: the share of the top 4 mined candidates the judge calls
    relevant and how often the top 1 is, by specificity and stratum, per question set and judge, with CIs."""
    sec = Section(STAGE, "incompleteness")
    # intervals resample clusters of questions (stats.cluster: by default each question's gold document)
    set_clusters = {name: clusters_of({q: g[0] for q, g in gold.items() if g}) for name, gold in golds.items()}
    inc = []
    for set_name, (qs, _) in question_sets.items():
        if qs.empty:
            continue
        specific = {q: ("specific" if str(v) == "True" else "broad") for q, v in zip(qs["query_id"], qs["qualified"])}
        meta = units.set_index("unit_id")
        stratum = {q: "stratum: " + meta.loc[g[0], "content_type"] for q, g in golds[set_name].items()}
        mined = mined_all[mined_all["question_set"] == set_name]
        for name in judgements["judge"].unique():
            labs = judgements[(judgements["judge"] == name) & (judgements["question_set"] == set_name)]
            t = pd.concat([mining.incompleteness(mined, labs, specific, seed=seed, clusters=set_clusters[set_name]),
                           mining.incompleteness(mined, labs, stratum, seed=seed, clusters=set_clusters[set_name]).iloc[1:]],
                          ignore_index=True)
            inc.append(t.assign(judge=name, question_set=set_name))
    incompleteness = pd.concat(inc, ignore_index=True) if inc else pd.DataFrame()
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(incompleteness[["question_set", "judge", "group", "n_queries", "relevant_in_top4", "relevant_in_top4_lo",
                              "relevant_in_top4_hi", "top1_relevant", "top1_relevant_lo", "top1_relevant_hi"]].to_string(index=False, na_rep="·")
              if len(incompleteness) else "no questions to mine")
    return sec, set_clusters, incompleteness


def rules_section(judgements: pd.DataFrame, chosen_all, seed: int, set_clusters, mining_question_set, judge,
                  second) -> tuple[Section, Any, Any]:
    """Each negative-picking rule scored against the judge's labels (and the second judge's). Writes
    negative_rules, negative_rules_by_judge."""
    sec = Section(STAGE, "rules")
    rule_tables = []
    for (set_name, name), labs in judgements.groupby(["question_set", "judge"], sort=True):
        t = mining.rule_table(chosen_all[chosen_all["question_set"] == set_name], labs, seed=seed,
                          clusters=set_clusters.get(set_name))
        rule_tables.append(t.assign(judge=name, question_set=set_name))
    rules_by_judge = (pd.concat(rule_tables, ignore_index=True) if rule_tables
                      else pd.DataFrame(columns=mining.RULE_COLUMNS + ["judge", "question_set"]))
    negative_rules = mining.independent_rules(rules_by_judge[rules_by_judge["question_set"] == mining_question_set],
                                          judge.name, second.name if second is not None else "")
    sec.say(f"\nthe judged rule picks its negatives with {judge.name}'s labels, so its contamination is measured by "
            + (f"{second.name}'s labels" if second is not None else "no independent judge: not measured (set mining.compare_judge)"))
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(rules_by_judge[["question_set", "judge", "rule", "n_queries", "n_negatives", "contamination", "contamination_lo",
                              "contamination_hi", "sufficient_share", "backfill_share", "median_rank"]].to_string(index=False, na_rep="·"))
    sec.table("negative_rules", negative_rules, sort_by=["rule"])
    sec.table("negative_rules_by_judge", rules_by_judge, sort_by=["question_set", "judge", "rule"])
    return sec, rules_by_judge, negative_rules


def rules_chart_section(rules_by_judge, mining_question_set, rules) -> tuple[Section]:
    """The chart of the negative-picking rules."""
    sec = Section(STAGE, "rules_chart")
    shown = rules_by_judge[rules_by_judge["question_set"] == mining_question_set]
    sec.figure("08_rules", charts.negative_rules(shown, rules, mining_question_set))
    return (sec,)


def agreement_section(second, judgements: pd.DataFrame, judge) -> tuple[Section, Any]:
    """Agreement between the two judges on mined candidates. Writes mined_agreement."""
    sec = Section(STAGE, "agreement")
    if second is not None:
        # the pairs both judges labelled: one either abstained on (it could not see what a label needs) is
        # counted and left out, never coded as a label
        pairs = judgements[judgements["judge"] == judge.name][["query_id", "unit_id", "label"]].merge(
            judgements[judgements["judge"] == second.name][["query_id", "unit_id", "label"]],
            on=["query_id", "unit_id"], suffixes=("", "_second"))
        both, left_out = agreement.labelled_by_both(pairs["label"], pairs["label_second"], judge.name, second.name,
                                                    "mined pairs")
        if left_out:
            sec.say(left_out)
        pairs = pairs[both].reset_index(drop=True)
        a, b = pairs[["label"]], pairs[["label_second"]].rename(columns={"label_second": "label"})
        mined_agreement = pd.DataFrame([{"first": judge.name, "second": second.name, **agreement.agreement(a["label"], b["label"]),
                                         "relevant_agreement": float((mining.is_relevant(a["label"]) == mining.is_relevant(b["label"])).mean())}])
        with pd.option_context("display.float_format", "{:.3f}".format):
            sec.say(mined_agreement.to_string(index=False, na_rep="·"))
            sec.say()
            sec.say(agreement.confusion(a["label"], b["label"]).to_string())
    else:
        mined_agreement = pd.DataFrame()
        sec.say("no second judge configured")
    sec.table("mined_agreement", mined_agreement)
    return sec, mined_agreement


def score_shape_section(judgements: pd.DataFrame, question_sets, mining_question_set, judge, chosen_all, golds,
                        units: pd.DataFrame, run_dir: Path, incompleteness, negative_rules, second,
                        label_agreement: pd.DataFrame | None = None) -> tuple[Section]:
    """How near-binary the judge's grades of mined candidates are; the training export and
    qrels/mined.qrels; what index.html says of stage 08 (with the judge's agreement with people where
    stage 06 measured it). Writes incompleteness, score_shape."""
    sec = Section(STAGE, "score_shape")
    grade = {"irrelevant": 0.0, "supporting": 50.0, "sufficient": 100.0}
    shape = pd.DataFrame([{"question_set": s_, "judge": name, **mining.score_shape(g["label"].map(grade), g["query_id"])}
                          for (s_, name), g in judgements[judgements["in_budget"].astype(bool)].groupby(["question_set", "judge"], sort=True)])
    sec.say(shape.to_string(index=False, na_rep="·"))

    # save
    export_qs = question_sets[mining_question_set][0]
    primary = judgements[(judgements["judge"] == judge.name) & (judgements["question_set"] == mining_question_set)]
    chosen = chosen_all[chosen_all["question_set"] == mining_question_set]
    sec.after_save.append(lambda: mining.export_training(chosen, export_qs, golds[mining_question_set], primary, units,
                                                     run_dir / "training"))
    pool_qrels = store.qrels_from(primary[primary["label"] != ABSTAIN].drop_duplicates(["query_id", "unit_id"]))
    if len(pool_qrels):
        sec.after_save.append(lambda: trec.write_qrels(pool_qrels, run_dir / "qrels" / "mined.qrels"))
    sec.table("incompleteness", incompleteness, sort_by=["question_set", "judge", "group"] if len(incompleteness) else None)
    sec.table("score_shape", shape, sort_by=["question_set", "judge"] if len(shape) else None)
    row = incompleteness[(incompleteness["judge"] == judge.name) & (incompleteness["group"] == "all")
                         & (incompleteness["question_set"] == mining_question_set)] if len(incompleteness) else incompleteness
    top = negative_rules.set_index("rule")["contamination"]
    by = negative_rules.set_index("rule")["measured_by"]
    abstained = primary[primary["label"] == ABSTAIN]
    why = "; ".join(sorted(set(abstained["abstained"]))) if "abstained" in abstained.columns else ""
    said = lambda r: (f"{top[r]:.2f} (labels: {by[r]})" if r in top.index and top[r] == top[r]  # noqa: E731
                      else f"not measured ({judge.name} abstained on its negatives{': ' + why if why else ''})"
                      if len(abstained) else "not measured (no judge independent of the selecting one)")
    measured = bool(len(row)) and int(row["n_queries"].iloc[0]) > 0
    sentence = (f"Of the top 4 mined candidates, {row['relevant_in_top4'].iloc[0]:.2f} per question are relevant and the "
                f"top-1 is relevant for {row['top1_relevant'].iloc[0]:.0%} of {int(row['n_queries'].iloc[0])} questions "
                f"({mining_question_set}, judge: {judge.name}); "
                f"contamination of top-k negatives {said('top-k')} vs judged {said('judged')}."
                if measured else
                f"Relevance among the mined candidates is not measured: {judge.name} abstained on "
                f"{len(abstained)} of {len(primary)} pairs ({why or 'it could not see them'})." if len(abstained)
                else "No validated questions to mine.")
    if len(abstained) and measured:
        sentence += (f" {judge.name} abstained on {len(abstained)} of {len(primary)} pairs ({why}): their questions "
                     "are not in these figures.")
    if judge.capabilities.source == "model":
        people = (label_agreement[(label_agreement["model"] == judge.name)
                                  & (label_agreement["adjudicator"] == "human")]
                  if label_agreement is not None and len(label_agreement) else pd.DataFrame())
        with_people = (f"its agreement with people on stage 06's pool: {summary.kappa_over(people.iloc[0])}"
                       if len(people) else "agreement with people not measured")
        sentence += (f" Model labels: {judge.name}, {with_people}"
                     + (f" (agreement with {second.name}: see mined_agreement)." if second is not None else "."))
    sec.headline(
        sentence,
                           figure="08_rules" if len(negative_rules) else "",
                           numbers={f"contamination, {r}": (f"{v:.2f}" if v == v else "not measured") for r, v in top.items()})
    return (sec,)



