"""Stage 06 · judge pool and labels: every system ranks the validated questions again; the pool;
model pre-labels and adjudication into the append-only label store; agreement; judged@k; a sample
of disagreements; the offline labelling page labelling/label.html.
"""

from __future__ import annotations

from typing import Any

from pathlib import Path

import numpy as np
import pandas as pd
from lookalike import params
from lookalike.analysis import calibration
from lookalike.analysis import negatives
from lookalike.judging import door as JD
from lookalike.judging import agreement as AG
from lookalike.report import summary
from lookalike.judging import judges
from lookalike.judging import pool
from lookalike.judging import store as L
from lookalike.judging import labeldb
from lookalike.judging import team
from lookalike.eval import metrics
from lookalike.retrieval import doc_context
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import derived as D
from lookalike.retrieval import catalog, systems
from lookalike.eval import trec
from lookalike.io.cache import Cache
from lookalike.retrieval.encoders.base import Vectors

from lookalike.report import images
from lookalike.data import demo
from lookalike.report.tables import fmt_ci
from lookalike.stages.base import Section, StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

STAGE = "06_judge_pool"
TITLE = 'Judge pool and labels'


def run(ctx: StageContext) -> StageResult:
    """Stage 06, in the order its notebook shows them: setup, systems, pool, labels, store, agreement,
    judged, disagreements, door, page. Reads and writes what lookalike.stages.contracts.CONTRACTS["06_judge_pool"]
    declares."""
    cfg, res = ctx.config, ctx.result(STAGE, TITLE)
    units, read = ctx.units(), ctx.table
    validated, distractors = read("questions_validated"), read("distractors")
    cache = Cache(cfg.encode.cache_dir or None)
    view, model, adjudicator, adjudicator_name = make_judges(ctx, units, cache)
    res.add(*setup_section(validated, model, adjudicator_name))
    runs, derived = res.add(*systems_section(validated, units, cfg, dict(ctx.encoder_settings(), run_dir=ctx.run_dir),
                                             ctx.optional_table("systems"), cache, ctx.run_dir))
    pooled, by_system = res.add(*pool_section(validated, distractors, units, runs, cfg.labels.pool_depth,
                                              cfg.negatives.template_k))
    yours = your_labels(ctx.optional_table("qrels"), validated, cfg.corpus)
    store, pre, added, team_labels, current, served = res.add(*labels_section(
        validated, model, pooled, view, adjudicator, yours, cfg.labels, ctx.run_dir))
    res.add(*store_section(store, added))
    both, agreement, annotator_agreement = res.add(*agreement_section(
        pre, current, model, yours, adjudicator, adjudicator_name, validated, team_labels, cfg.seed))
    qrels, judged = res.add(*judged_section(current, runs))
    res.add(*disagreements_section(both, cfg.seed, validated, units, ctx.run_dir))
    door, door_summary = res.add(*door_section(model, ctx.optional_table("planted"), pooled, validated, view, units,
                                               pre, team_labels, served.get("door", cfg.labels.door),
                                               "door" in served))
    res.add(*page_section(current, cfg.labels.page_items, cfg.seed, validated, units, ctx.run_dir, qrels, door,
                          agreement, model, team_labels, annotator_agreement, pooled,
                          summary.unit_noun(cfg.corpus.source, units["content_type"])))
    return res


def make_judges(ctx: StageContext, units: pd.DataFrame, cache: Cache):
    """Stage 06's judges and what they read: the page view (OCR text through the cache), the model judge
    (labels.model_judge at the judge endpoint) and the adjudicator (labels.adjudicator; auto: the demo's
    answer key when there is one, else none), with the adjudicator's name as configured."""
    cfg, read = ctx.config, ctx.table
    facts, answer_key = read("facts"), read("answer_key")
    texts = systems.ocr_texts(units, ctx.run_dir, cache, cfg.encode.ocr_engine, cfg.encode.workers,
                               text_source=cfg.encode.text_source)
    view = judges.unit_viewer(units, texts, ctx.run_dir)
    v = cfg.validate
    model = judges.make_judge(cfg.labels.model_judge, units=units, **ctx.judge_settings(cache.root))
    name = cfg.labels.adjudicator
    if name == "auto":
        name = "reference" if len(answer_key) else "none"
    adjudicator = None if name == "none" else judges.make_judge(
        name, facts=facts, answer_key=answer_key, units=units, regions=demo.REGIONS, page_base=cfg.corpus.page_base,
        labels=str(params.repo_path(v.labels) or ""))
    return view, model, adjudicator, name


def your_labels(given: pd.DataFrame | None, validated: pd.DataFrame, corpus) -> list:
    """Your page-level judgements (off the demo) as people's labels for the store, named after your qrels
    file (or the corpus source)."""
    shas = {q: L.question_sha(t) for q, t in zip(validated["query_id"], validated["text"])}
    if corpus.source == "demo" or given is None or not len(given):
        return []
    return L.labels_from_qrels(given[given["level"] == "page"], Path(str(corpus.qrels)).name or corpus.source, shas)


def setup_section(validated: pd.DataFrame, model, name: str) -> tuple[Section]:
    """What stage 06 judges: the validated questions, the model judge and the adjudicator (by name)."""
    sec = Section(STAGE, "setup")
    sec.say(f"validated questions: {len(validated)}; model judge: {model.name}; adjudicator: "
            + ("the demo's answer key (reference)" if name == "reference" else name))
    return (sec,)


def systems_section(validated: pd.DataFrame, units: pd.DataFrame, cfg, settings: dict, sys_table: pd.DataFrame | None,
                    cache: Cache, run_dir: Path) -> tuple[Section, dict, D.Derived]:
    """Every system pooled for the validated questions: base runs, the catalogue's fusions and document
    context, +rerank / +split. Writes rerank_scores_validated, query_splits_validated, derived_failed_validated."""
    sec = Section(STAGE, "systems")
    retrieve_depth, retrieve_rrf_k, seed = cfg.retrieve.depth, cfg.retrieve.rrf_k, cfg.seed
    names = systems.base_systems(run_dir, cfg.encode.encoders)
    unit_vectors = {n: Vectors.load(run_dir / "vectors" / f"{n}.npz") for n in names}
    query_vectors = systems.encode_queries(validated, names, **settings) if len(validated) else {}
    runs = (systems.build_runs(unit_vectors, query_vectors, retrieve_depth, retrieve_rrf_k, stage="06")
            if len(validated) else {})
    derived_plan = catalog.plan(names, {n: systems.declared_provenance(n, unit_vectors[n]) for n in names}, "06",
                                units["doc_id"])
    if derived_plan.not_built:
        sec.say("\n".join(derived_plan.not_built.values()))
    for name, members in derived_plan.rescorings().items():
        if members[0] in runs:      # no questions, no runs
            score = doc_context.system_scorer(name, members, unit_vectors, units["doc_id"], seed)
            member = query_vectors[members[0]]
            runs[name] = retrieve.run_from_scorer(lambda rows, score=score, member=member: score(member.take(rows)),
                                                  list(validated["query_id"]), list(units["unit_id"]), retrieve_depth)
    sys_table = pd.DataFrame() if sys_table is None else sys_table
    external = (sorted(sys_table.loc[sys_table["provenance"] == "external", "system"])
                if "provenance" in sys_table.columns else [])
    for name in external:           # your runs: they ranked the questions as generated
        ext = trec.read_run_file(run_dir / "runs" / f"{name}.run")[0]
        runs[name] = ext[ext["query_id"].isin(set(validated["query_id"]))].reset_index(drop=True)
    derived = D.build(runs, validated, unit_vectors, units, run_dir, cache, cfg.rerank, cfg.split, cfg.encode,
                      settings, retrieve_depth)
    runs.update(derived.runs)
    written = dict(runs)        # as this section leaves them, written when the stage is saved

    sec.after_save.append(lambda: systems.write_runs(written, run_dir, "runs_validated"))
    sec.say("systems:", ", ".join(runs) if runs else "none (no validated questions)")
    sec.say("\n".join(derived.notes) if derived.notes else
            "no reranking or query splitting configured (rerank.systems, split.systems)")
    sec.table("rerank_scores_validated", derived.rerank_scores, sort_by=["system", "query_id", "new_rank"])
    sec.table("query_splits_validated", derived.splits, sort_by=["system", "query_id", "position"])
    sec.table("derived_failed_validated", derived.failed, sort_by=["system", "query_id"])
    return sec, runs, derived


def pool_section(validated: pd.DataFrame, distractors: pd.DataFrame, units: pd.DataFrame, runs,
                 labels_pool_depth, template_k: int = negatives.TEMPLATE_K) -> tuple[Section, Any, Any]:
    """The judge pool: each system's top pool_depth per validated question, with the gold and its
    distractors. Writes pool, pool_by_system."""
    sec = Section(STAGE, "pool")
    cands = negatives.hard_candidates(validated, distractors, units, template_k)   # gold, per-axis distractors, the template's look-alikes
    pooled = pool.pool(runs, validated["query_id"], labels_pool_depth, cands)
    by_system = pool.pool_by_system(pooled, runs)
    sec.say(f"pairs in the pool: {len(pooled)} ({len(validated)} questions; "
          f"{int(pooled['hard_candidate'].sum())} hard candidates, {int((pooled['systems'] != '').sum())} from system top-{labels_pool_depth})")
    if negatives.capped_templates_note(units, template_k):
        sec.say(negatives.capped_templates_note(units, template_k))
    sec.say(by_system.to_string(index=False))
    sec.table("pool", pooled, sort_by=["query_id", "unit_id"])
    sec.table("pool_by_system", by_system, sort_by=["system"])
    return sec, pooled, by_system


def labels_section(validated: pd.DataFrame, model, pooled: pd.DataFrame, view, adjudicator, yours: list, labels_cfg,
                   run_dir: Path) -> tuple[Section, L.LabelStore, pd.DataFrame, int, pd.DataFrame, pd.DataFrame, dict]:
    """Labels for the pool: people's labels first (your judgements, the team's database, the store), then
    the model judge's pre-labels and the adjudicator's, never overriding a person. The round's settings
    (labels per pair, the door) are the label database's when it holds them — how the round ran — and
    a params value that differs is said. Writes labels_current."""
    sec = Section(STAGE, "labels")
    shas = {q: L.question_sha(t) for q, t in zip(validated["query_id"], validated["text"])}
    store = L.LabelStore(run_dir / "labels" / "store.jsonl")
    pre = judges.label_pairs(model, pooled, validated, view, shas)
    adj = judges.label_pairs(adjudicator, pooled, validated, view, shas) if adjudicator is not None else pre.head(0)
    # your page-level judgements (yours) are people's labels: never overridden by a model or the reference
    added = (store.append(pre.to_dict("records")) + store.append(adj.to_dict("records"))
             + store.append(yours))
    if yours:
        sec.say(f"your judgements: {len(yours)} pairs entered the store as people's labels")
    # the team's label database (lookalike labels serve): its people's labels join the store first
    team_db = labeldb.existing(labels_cfg.db, run_dir)
    team_labels = team_db.labels() if team_db is not None else pd.DataFrame()
    served = team_db.settings() if team_db is not None else {}
    for key, held in sorted(served.items()):
        given = getattr(labels_cfg, key)
        if given != held:
            word = (lambda v: ("on" if v else "off") if isinstance(v, bool) else str(v))  # noqa: E731
            sec.say(f"labels.{key} is {word(given)} in the params; the label database says {word(held)}, which is how "
                    "the round of labelling ran: the database's is used")
    if team_db is not None:
        sent = team.export_to_store(team_db, store)
        sec.say(f"team label database {labeldb.describe(team_db.target, run_dir)}: {len(team_labels)} live labels from "
                f"{team_labels['annotator'].nunique() if len(team_labels) else 0} people; {sent['written']} written to "
                f"the store now, {sent['already_held']} already there, {sent['retracted']} taken back by undo (kept in "
                f"the database only)" + (f", {sent['metadata_pool']} from the metadata pool (they saw file names and "
                                         "captions: used for the judge door only, never for the qrels)"
                                         if sent["metadata_pool"] else ""))
    else:
        sec.say("no team label database for this run (`lookalike labels serve` starts one)")
    current = store.current(shas)
    current = current.merge(pooled[["query_id", "unit_id"]], on=["query_id", "unit_id"])
    sec.say(f"model labels: {len(pre)}; adjudicator labels: {len(adj)}")
    for who, labels in ((model, pre), (adjudicator, adj)) if adjudicator is not None else ((model, pre),):
        for reason, n in labels.attrs.get("abstained", {}).items():
            sec.say(f"{who.name} abstained on {n} of {len(pooled)} pairs: {reason}; they stay unlabelled (for people "
                    "or a judge that can see them), and a figure resting on them counts them as unlabelled")
    sec.say(f"current labels: {len(current)}, adjudicated: {int(current['adjudicated'].sum())}, "
          f"conflicting adjudications: {int(current['conflict'].sum())}")
    sec.say(current.groupby(["source", "label"]).size().rename("pairs").reset_index().to_string(index=False))
    sec.table("labels_current", current, sort_by=["query_id", "unit_id"])
    return sec, store, pre, added, team_labels, current, served


def store_section(store, added) -> tuple[Section]:
    """The label store: how many labels it holds. (How many this run added is not said: a rerun adds none
    of what the first run added, and the same params must give the same notebook, byte for byte.)"""
    sec = Section(STAGE, "store")
    sec.say(f"store: {store.path.name}, {len(store.rows)} labels held")
    return (sec,)


def agreement_section(pre, current: pd.DataFrame, model, yours, adjudicator, adjudicator_name,
                      validated: pd.DataFrame, team_labels, seed: int) -> tuple[Section, Any, Any, Any]:
    """Agreement between the model judge and the adjudicator, and between the team's annotators (kappa
    with its CI). Writes label_agreement, annotator_agreement."""
    sec = Section(STAGE, "agreement")
    both = pre.merge(current[current["adjudicated"]][["query_id", "unit_id", "label"]], on=["query_id", "unit_id"],
                     suffixes=("_model", "_adjudicated"))
    if len(both):
        agreement = pd.DataFrame([{"model": model.name,
                                   "adjudicator": "human" if yours and adjudicator is None else adjudicator_name,
                                   **AG.agreement(both["label_model"], both["label_adjudicated"])}])
        with pd.option_context("display.float_format", "{:.3f}".format):
            sec.say(agreement.to_string(index=False, na_rep="undefined"))
            sec.say()
            sec.say(AG.confusion(both["label_model"], both["label_adjudicated"]).to_string())
    else:
        agreement = pd.DataFrame(columns=["model", "adjudicator", "n", "agreement", "kappa", "kappa_lo", "kappa_hi", "n_boundary", "kappa_boundary"])
        sec.say("no adjudicated labels yet: open the labelling sheet (labelling/label.html), label, and run `lookalike labels import`")

    text_of = dict(zip(validated["query_id"], validated["text"].astype(str)))
    machine = pd.DataFrame({"pair_id": [L.pair_id(q, u, text_of[q]) for q, u in zip(pre["query_id"], pre["unit_id"])],
                            "judge": pre["judge"], "label": pre["label"]})
    annotator_agreement = (team.agreement_table(team_labels, machine, seed=seed) if len(team_labels)
                           else pd.DataFrame(columns=team.AGREEMENT_COLUMNS))
    for row in annotator_agreement.to_dict("records"):
        sec.say(f"{row['scope']}: {row['first']} vs {row['second']}: {team.agreement_words(row)}")
    if annotator_agreement.empty:
        sec.say("agreement among people: no team labels (two or more people per pair, labels.per_pair, give it)")
    sec.table("label_agreement", agreement)
    sec.table("annotator_agreement", annotator_agreement)
    return sec, both, agreement, annotator_agreement


def judged_section(current: pd.DataFrame, runs) -> tuple[Section, Any, Any]:
    """How much of each system's top 10 is judged (judged@10). Writes judged."""
    sec = Section(STAGE, "judged")
    qrels = L.qrels_from(current)
    judged_rows = []
    cols = ["judged_1", "judged_5", "judged_10", "judged_20"]
    for name, run in runs.items():
        if not len(qrels):          # no labels at all: nothing in any system's top k is judged
            judged_rows.append({"system": name, **dict.fromkeys(cols, 0.0)})
            continue
        ev = metrics.evaluate(qrels, run, cols)
        judged_rows.append({"system": name, **ev.mean().to_dict()})
    judged = pd.DataFrame(judged_rows, columns=["system", "judged_1", "judged_5", "judged_10", "judged_20"])
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(judged.to_string(index=False) if len(judged) else "no systems")
    sec.table("judged", judged, sort_by=["system"])
    return sec, qrels, judged


def disagreements_section(both, seed: int, validated: pd.DataFrame, units: pd.DataFrame,
                          run_dir: Path) -> tuple[Section]:
    """A sample of pairs where the model judge and the adjudicator disagree, as images."""
    sec = Section(STAGE, "disagreements")
    diff = both[both["label_model"] != both["label_adjudicated"]] if len(both) else both
    if len(diff):
        sample = diff.iloc[np.sort(np.random.default_rng([seed, 66]).choice(len(diff), size=min(4, len(diff)),
                                                                             replace=False))]
        for r in sample.itertuples():
            sec.say(f"{r.query_id} · {r.unit_id}: model {r.label_model}, adjudicated {r.label_adjudicated}\n"
                  f"   question: {validated.set_index('query_id').loc[r.query_id, 'text']}")
        sec.figure("06_disagreements", images.pair_sheet(sample, units, run_dir))
    else:
        sec.say("no disagreements to show")
    return (sec,)


def door_section(model, planted: pd.DataFrame | None, pooled: pd.DataFrame, validated: pd.DataFrame, view,
                 units: pd.DataFrame, pre: pd.DataFrame, team_labels: pd.DataFrame,
                 people_door: bool, from_db: bool = False) -> tuple[Section, pd.DataFrame, pd.DataFrame]:
    """The judge door: whether people labelled blind or after seeing the model's label, and what that did
    to their agreement with it; people_door is the label database's door when it records one (from_db),
    else labels.door. Writes judge_door_summary."""
    sec = Section(STAGE, "door")
    door = pd.DataFrame(columns=JD.DOOR_COLUMNS)
    door_summary = pd.DataFrame(columns=JD.SUMMARY_COLUMNS)
    door_judges = []
    if model.capabilities.reads_text and not model.capabilities.needs_endpoint:
        door_judges.append((model, model.name))
    else:
        sec.say(f"the {model.name} judge does not read text here: its door is not run (that needs every pair sent twice)")
    if planted is not None and (planted["effect"].str.startswith("judge door")).any():
        door_judges.append((JD.subject_terms_judge(), f"{calibration.DOOR_JUDGE} (planted: a lenient judge, half of the "
                                                      "question's words on the page make it supporting)"))
    # the model judge's blind pass is its pre-labels above: the same judge, pairs and view
    doors = [JD.judge_door(j, pooled, validated, view, units, name, blind=pre if j is model else None)
             for j, name in door_judges] if len(pooled) else []
    for _, summary_row in doors:
        if summary_row.attrs.get("not_measured"):
            sec.say(summary_row.attrs["not_measured"])
    doors = [(d, s) for d, s in doors if len(s)]
    if doors:
        door = pd.concat([d.assign(judge=s["judge"].iloc[0]) for d, s in doors],
                         ignore_index=True)[["judge"] + JD.DOOR_COLUMNS]
        door_summary = pd.concat([s for _, s in doors], ignore_index=True)
    # the label database says how the round of labelling ran: a metadata pool in it means the server ran
    # with the door on, whatever the params say now
    served_with_door = bool(len(team_labels) and "pool" in team_labels.columns
                            and (team_labels["pool"] == "metadata").any())
    where = "in the label database" if from_db else "in the params"
    if len(team_labels) and not people_door and not served_with_door:
        sec.say(f"people: the judge door is off {where} and the label database holds no metadata pool, so everyone "
                "labelled blind and there is no people row")
    elif len(team_labels):
        if served_with_door and not people_door:
            sec.say(f"people: the judge door is off {where}, but the label database holds labels from a metadata "
                    "pool (the server ran with the door on): the labels are what happened, so the door is measured")
        people_pairs, people_summary, why = JD.people_door(team_labels, validated, units)
        if why:
            sec.say(f"people: {why}")
        else:
            door = pd.concat([door, people_pairs.assign(judge=people_summary["judge"].iloc[0])],
                             ignore_index=True)[["judge"] + JD.DOOR_COLUMNS]
            door_summary = pd.concat([door_summary, people_summary], ignore_index=True)
    for d in door_summary.itertuples():
        sec.say(f"{d.judge}, {d.n_pairs} pairs: relevant {d.relevant_blind} "
                f"({fmt_ci(d.share_blind, d.share_blind_lo, d.share_blind_hi)}) blind, {d.relevant_with_metadata} "
                f"({fmt_ci(d.share_with_metadata, d.share_with_metadata_lo, d.share_with_metadata_hi)}) with each "
                f"unit's file name and caption shown, difference "
                f"{fmt_ci(d.difference, d.difference_lo, d.difference_hi)} ({d.gained} gained, "
                f"{d.lost} lost); gains whose file name or caption holds a query word: "
                + (fmt_ci(d.gained_with_term, d.gained_with_term_lo, d.gained_with_term_hi) if d.gained else "none")
                + f", the other pairs: {fmt_ci(d.others_with_term, d.others_with_term_lo, d.others_with_term_hi)} "
                  "(bootstrap 95%, documents resampled)")
    sec.table("judge_door_summary", door_summary)
    return sec, door, door_summary


def adjudicated_words(current: pd.DataFrame) -> str:
    """'N adjudicated', with the pairs whose only adjudication is the judgements that came with the corpus
    said as that: nobody adjudicated them here."""
    if not len(current):
        return "0 adjudicated"
    adjudicated = current[current["adjudicated"]]
    supplied = (adjudicated["source"] == "human") & adjudicated["judge"].astype(str).str.startswith("qrels:")
    if not supplied.any():
        return f"{len(adjudicated)} adjudicated"
    return (f"{int(supplied.sum())} judged by the judgements that came with the corpus"
            + (f", {int((~supplied).sum())} adjudicated here" if (~supplied).any() else " (none adjudicated here)"))


def sheet_pairs(pooled: pd.DataFrame, current: pd.DataFrame, size: int, seed: int
                ) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """What the labelling page offers (query_id, unit_id frames): pooled pairs no person has labelled (a label
    whose source is human: people's, an adjudicator's, the judgements that came with the corpus), a seeded
    sample of at most size; then, only while the page has room, pairs people labelled already, a seeded
    sample, for agreement with those labels. A pair a model or the demo's answer key labelled still needs
    a person. Returns (the unlabelled pairs offered, the labelled ones shown again, how many pooled pairs no
    person has labelled)."""
    cols = ["query_id", "unit_id"]
    pairs = pooled[cols].drop_duplicates().sort_values(cols, kind="mergesort").reset_index(drop=True)
    people = current[current["source"] == "human"] if len(current) else current
    held = set(zip(people["query_id"], people["unit_id"])) if len(people) else set()
    labelled = [(q, u) in held for q, u in zip(pairs["query_id"], pairs["unit_id"])]
    todo, done = pairs[[not x for x in labelled]], pairs[labelled]
    need = todo.iloc[np.random.default_rng([seed, 61]).permutation(len(todo))[:size]]
    room = max(0, size - len(need))
    again = done.iloc[np.sort(np.random.default_rng([seed, 62]).permutation(len(done))[:room])]
    return need.reset_index(drop=True), again.reset_index(drop=True), len(todo)


def page_section(current: pd.DataFrame, labels_page_items, seed: int, validated: pd.DataFrame, units: pd.DataFrame,
                 run_dir: Path, qrels: pd.DataFrame, door, agreement, model, team_labels, annotator_agreement,
                 pooled: pd.DataFrame, noun: str = "page") -> tuple[Section]:
    """The labelling page for the pairs people have not labelled yet (the rubric for the corpus's units),
    and what index.html says of stage 06.
    Writes judge_door."""
    sec = Section(STAGE, "page")
    need, again, unlabelled = sheet_pairs(pooled, current, labels_page_items, seed)
    page_pairs = pd.concat([need, again], ignore_index=True)
    if len(page_pairs):
        sec.after_save.append(lambda: L.labelling_page(page_pairs, validated, units, run_dir, run_dir / "labelling",
                                                       seed, title=f"lookalike — label {noun}s", noun=noun))
        sec.say(f"labelling/label.html: {len(need)} of the {unlabelled} pooled pairs no person has labelled (a seeded "
                f"sample, labels.page_items {labels_page_items})"
                + (f", and {len(again)} pairs people labelled already, shown again to measure agreement with those "
                   "labels (the page had room left)" if len(again) else ""))
    else:
        sec.say("nothing to label: no pair was pooled")

    # save
    if len(qrels):
        sec.after_save.append(lambda: trec.write_qrels(qrels, run_dir / "qrels" / "labels.qrels"))
    sec.table("judge_door", door, sort_by=["judge", "query_id", "unit_id"] if len(door) else None)
    n_adjudicated = int(current["adjudicated"].sum()) if len(current) else 0
    kappa = (f"{summary.kappa_words(agreement.iloc[0])} "
             f"({model.name} vs {agreement['adjudicator'].iloc[0]}, {int(agreement['n'].iloc[0])} pairs)"
             if len(agreement) else
             f"agreement not measured (no pair holds both a label of the {model.name} judge and an adjudicated one)"
             if n_adjudicated else "no adjudication yet")
    people_words = ""
    if len(team_labels):
        among = annotator_agreement[annotator_agreement["scope"].str.startswith("people, overall")].iloc[0]
        people_words = (f" The team labelled {len(team_labels)} times ({team_labels['annotator'].nunique()} people); "
                        f"{among['scope']}: {team.agreement_words(among)}.")
    sec.headline(
        f"{len(pooled)} pooled pairs for {len(validated)} validated questions; {adjudicated_words(current)}; "
        f"model pre-labels: {kappa}. {L.provenance(current, agreement)[0][0].upper()}{L.provenance(current, agreement)[0][1:]}."
        + people_words,
        numbers={"pooled pairs": len(pooled), "adjudicated": int(current["adjudicated"].sum()),
                 **({"kappa (model vs adjudicator)": summary.kappa_words(agreement.iloc[0])} if len(agreement) else {}),
                 **({"team labels": len(team_labels)} if len(team_labels) else {})},
    )
    return (sec,)
