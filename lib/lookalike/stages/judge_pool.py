"""Stage 06 · judge pool and labels: every system ranks the validated questions again; the pool;
model pre-labels and adjudication into the append-only label store; agreement; judged@k; a sample
of disagreements; the offline labelling page labelling/label.html.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from lookalike.analysis import calibration as C
from lookalike.analysis import negatives as N
from lookalike.analysis import scoring as S
from lookalike.judging import door as JD
from lookalike.judging import judges as J
from lookalike.judging import pool as JP
from lookalike.judging import store as L
from lookalike.judging import labeldb as LDB
from lookalike.judging import team
from lookalike.eval import metrics as M
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import derived as D
from lookalike.retrieval import catalog, systems
from lookalike.eval import ranking, trec
from lookalike.io.cache import Cache
from lookalike.retrieval.encoders.base import Vectors

from lookalike.report import images
from lookalike.stages.base import StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

TITLE = 'Judge pool and labels'


def run(ctx: StageContext) -> StageResult:
    """Stage 06: its sections, in the order it builds them: setup, systems, pool, labels, store, agreement,
    judged, disagreements, door, page. Reads and writes what
    lookalike.stages.contracts.CONTRACTS["06_judge_pool"] declares."""
    seed = ctx.get('seed')
    encode_ocr_engine = ctx.get('encode.ocr_engine')
    encode_cache_dir = ctx.get('encode.cache_dir')
    encode_workers = ctx.get('encode.workers')
    retrieve_depth = ctx.get('retrieve.depth')
    retrieve_rrf_k = ctx.get('retrieve.rrf_k')
    labels_pool_depth = ctx.get('labels.pool_depth')
    labels_model_judge = ctx.get('labels.model_judge')
    labels_adjudicator = ctx.get('labels.adjudicator')
    labels_page_items = ctx.get('labels.page_items')
    validate_judge_url = ctx.get('validate.judge_url')
    validate_judge_model = ctx.get('validate.judge_model')
    res = StageResult('06_judge_pool', TITLE, ctx.run_dir)

    res.section("setup")
    RUN = ctx.run_dir
    read = ctx.table
    units = ctx.units()
    validated, facts, answer_key, distractors = read("questions_validated"), read("facts"), read("answer_key"), read("distractors")
    cache = Cache(encode_cache_dir or None)
    texts = systems.ocr_texts(units, RUN, cache, encode_ocr_engine, encode_workers)
    view = J.unit_viewer(units, texts, RUN)
    model = J.make_judge(labels_model_judge, units=units, url=validate_judge_url, model=validate_judge_model,
                         samples=ctx.get("validate.judge_samples"), temperature=ctx.get("validate.judge_temperature"),
                      timeout_s=ctx.get("judges.timeout_s"), max_attempts=ctx.get("judges.max_attempts"),
                         cache_dir=cache.root / "judges")
    adjudicator_name = labels_adjudicator
    if adjudicator_name == "auto":
        adjudicator_name = "reference" if len(answer_key) else "none"
    adjudicator = None if adjudicator_name == "none" else J.make_judge(
        adjudicator_name, facts=facts, answer_key=answer_key, units=units, page_base=ctx.get("corpus.page_base"),
        labels=str(ctx.path("validate.labels") or ""))
    res.say(f"validated questions: {len(validated)}; model judge: {model.name}; adjudicator: "
          + ("the demo's answer key (reference)" if adjudicator_name == "reference" else adjudicator_name))

    res.section("systems")
    names = systems.base_systems(RUN, ctx.get("encode.encoders"))
    unit_vectors = {n: Vectors.load(RUN / "vectors" / f"{n}.npz") for n in names}
    settings = dict(ctx.encoder_settings(), run_dir=RUN)
    query_vectors = systems.encode_queries(validated, names, **settings) if len(validated) else {}
    runs = (systems.build_runs(unit_vectors, query_vectors, retrieve_depth, retrieve_rrf_k, stage="06")
            if len(validated) else {})
    derived_plan = catalog.plan(names, {n: systems.declared_provenance(n, unit_vectors[n]) for n in names}, "06")
    if derived_plan.not_built:
        res.say("\n".join(derived_plan.not_built.values()))
    if "ocr-minilm" in runs and derived_plan.has(catalog.DOC_CONTEXT):
        # document-context scoring (VL-DocIR eq. 8): page score + the query's match to its document's context vectors
        dc = retrieve.document_context_scores(list(query_vectors["ocr-minilm"].data), list(unit_vectors["ocr-minilm"].data),
                                              units["doc_id"], n_context=4, seed=seed)
        runs[catalog.DOC_CONTEXT] = retrieve.run_from_scores(dc, list(validated["query_id"]), list(units["unit_id"]),
                                                                  retrieve_depth)
    sys_table = ctx.optional_table("systems")
    sys_table = pd.DataFrame() if sys_table is None else sys_table
    external = (sorted(sys_table.loc[sys_table["provenance"] == "external", "system"])
                if "provenance" in sys_table.columns else [])
    for name in external:           # your runs: they ranked the questions as generated
        ext = trec.read_run(RUN / "runs" / f"{name}.run")[0]
        runs[name] = ext[ext["query_id"].isin(set(validated["query_id"]))].reset_index(drop=True)
    derived = D.build(runs, validated, unit_vectors, units, RUN, cache, ctx.config.rerank, ctx.config.split,
                      ctx.config.encode, settings, retrieve_depth)
    runs.update(derived.runs)
    out = RUN / "runs_validated"
    out.mkdir(exist_ok=True)
    for name, run in runs.items():
        ranking.write_run(run, out / f"{name}.run", tag=name)
    res.say("systems:", ", ".join(runs) if runs else "none (no validated questions)")
    res.say("\n".join(derived.notes) if derived.notes else
            "no reranking or query splitting configured (rerank.systems, split.systems)")

    res.section("pool")
    cands = N.hard_candidates(validated, distractors, units)   # gold, per-axis distractors, the template's look-alikes
    pooled = JP.pool(runs, validated["query_id"], labels_pool_depth, cands)
    by_system = JP.pool_by_system(pooled, runs)
    res.say(f"pairs in the pool: {len(pooled)} ({len(validated)} questions; "
          f"{int(pooled['hard_candidate'].sum())} hard candidates, {int((pooled['systems'] != '').sum())} from system top-{labels_pool_depth})")
    res.say(by_system.to_string(index=False))

    res.section("labels")
    shas = {q: L.question_sha(t) for q, t in zip(validated["query_id"], validated["text"])}
    store = L.LabelStore(RUN / "labels" / "store.jsonl")
    pre = J.label_pairs(model, pooled, validated, view, shas)
    adj = J.label_pairs(adjudicator, pooled, validated, view, shas) if adjudicator is not None else pre.head(0)
    # your page-level judgements are people's labels (never overridden by a model or the reference)
    given = read("qrels") if ctx.has_table("qrels") else pd.DataFrame()
    yours = (L.labels_from_qrels(given[given["level"] == "page"], Path(str(ctx.get("corpus.qrels"))).name or
                                 ctx.get("corpus.source"), shas)
             if ctx.get("corpus.source") != "demo" and len(given) else [])
    added = (store.append(pre.to_dict("records")) + store.append(adj.to_dict("records"))
             + store.append(yours))
    if yours:
        res.say(f"your judgements: {len(yours)} pairs entered the store as people's labels")
    # the team's label database (lookalike labels serve): its people's labels join the store first
    team_db = LDB.existing(ctx.get("labels.db"), RUN)
    team_labels = team_db.labels() if team_db is not None else pd.DataFrame()
    if team_db is not None:
        sent = team.export_to_store(team_db, store)
        res.say(f"team label database {LDB.describe(team_db.target, RUN)}: {len(team_labels)} live labels from "
                f"{team_labels['annotator'].nunique() if len(team_labels) else 0} people; {sent['written']} written to "
                f"the store now, {sent['already_held']} already there, {sent['retracted']} taken back by undo (kept in "
                f"the database only)" + (f", {sent['metadata_pool']} from the metadata pool (they saw file names and "
                                         "captions: used for the judge door only, never for the qrels)"
                                         if sent["metadata_pool"] else ""))
    else:
        res.say("no team label database for this run (`lookalike labels serve` starts one)")
    current = store.current(shas)
    current = current.merge(pooled[["query_id", "unit_id"]], on=["query_id", "unit_id"])
    res.say(f"model labels: {len(pre)}; adjudicator labels: {len(adj)}")
    res.say(f"current labels: {len(current)}, adjudicated: {int(current['adjudicated'].sum())}, "
          f"conflicting adjudications: {int(current['conflict'].sum())}")
    res.say(current.groupby(["source", "label"]).size().rename("pairs").reset_index().to_string(index=False))

    res.section("store")
    res.say(f"store: {store.path.name}, {len(store.rows)} labels held, {added} added by this run")

    res.section("agreement")
    both = pre.merge(current[current["adjudicated"]][["query_id", "unit_id", "label"]], on=["query_id", "unit_id"],
                     suffixes=("_model", "_adjudicated"))
    if len(both):
        agreement = pd.DataFrame([{"model": model.name,
                                   "adjudicator": "human" if yours and adjudicator is None else adjudicator_name,
                                   **J.agreement(both["label_model"], both["label_adjudicated"])}])
        with pd.option_context("display.float_format", "{:.3f}".format):
            res.say(agreement.to_string(index=False, na_rep="undefined"))
            res.say()
            res.say(J.confusion(both["label_model"], both["label_adjudicated"]).to_string())
    else:
        agreement = pd.DataFrame(columns=["model", "adjudicator", "n", "agreement", "kappa", "kappa_lo", "kappa_hi", "n_boundary", "kappa_boundary"])
        res.say("no adjudicated labels yet: export the labelling page, label, and run `lookalike labels import`")

    text_of = dict(zip(validated["query_id"], validated["text"].astype(str)))
    machine = pd.DataFrame({"pair_id": [L.pair_id(q, u, text_of[q]) for q, u in zip(pre["query_id"], pre["unit_id"])],
                            "judge": pre["judge"], "label": pre["label"]})
    annotator_agreement = (team.agreement_table(team_labels, machine, seed=seed) if len(team_labels)
                           else pd.DataFrame(columns=team.AGREEMENT_COLUMNS))
    for row in annotator_agreement.to_dict("records"):
        res.say(f"{row['scope']}: {row['first']} vs {row['second']}: {team.agreement_words(row)}")
    if annotator_agreement.empty:
        res.say("agreement among people: no team labels (two or more people per pair, labels.per_pair, give it)")

    res.section("judged")
    qrels = L.qrels_from(current)
    judged_rows = []
    for name, run in runs.items():
        ev = M.evaluate(qrels, run, ["judged_1", "judged_5", "judged_10", "judged_20"])
        judged_rows.append({"system": name, **ev.mean().to_dict()})
    judged = pd.DataFrame(judged_rows, columns=["system", "judged_1", "judged_5", "judged_10", "judged_20"])
    with pd.option_context("display.float_format", "{:.3f}".format):
        res.say(judged.to_string(index=False) if len(judged) else "no systems")

    res.section("disagreements")
    diff = both[both["label_model"] != both["label_adjudicated"]] if len(both) else both
    if len(diff):
        sample = diff.iloc[np.sort(np.random.default_rng([seed, 66]).choice(len(diff), size=min(4, len(diff)),
                                                                             replace=False))]
        for r in sample.itertuples():
            res.say(f"{r.query_id} · {r.unit_id}: model {r.label_model}, adjudicated {r.label_adjudicated}\n"
                  f"   question: {validated.set_index('query_id').loc[r.query_id, 'text']}")
        res.figure("06_disagreements", images.pair_sheet(sample, units, RUN))
    else:
        res.say("no disagreements to show")

    res.section("door")
    door = pd.DataFrame(columns=JD.DOOR_COLUMNS)
    door_summary = pd.DataFrame(columns=JD.SUMMARY_COLUMNS)
    door_judges = []
    if model.capabilities.reads_text and not model.capabilities.needs_endpoint:
        door_judges.append((model, model.name))
    else:
        res.say(f"the {model.name} judge does not read text here: its door is not run (that needs every pair sent twice)")
    if ctx.has_table("planted") and (read("planted")["effect"].str.startswith("judge door")).any():
        door_judges.append((JD.subject_terms_judge(), f"{C.DOOR_JUDGE} (planted: a lenient judge, half of the "
                                                      "question's words on the page make it supporting)"))
    # the model judge's blind pass is its pre-labels above: the same judge, pairs and view
    doors = [JD.judge_door(j, pooled, validated, view, units, name, blind=pre if j is model else None)
             for j, name in door_judges] if len(pooled) else []
    if doors:
        door = pd.concat([d.assign(judge=name) for (d, _), (_, name) in zip(doors, door_judges)],
                         ignore_index=True)[["judge"] + JD.DOOR_COLUMNS]
        door_summary = pd.concat([s for _, s in doors], ignore_index=True)
    if len(team_labels) and not ctx.get("labels.door"):
        res.say("people: labels.door is off, so everyone labelled blind and there is no people row")
    elif len(team_labels):
        people_pairs, people_summary, why = JD.people_door(team_labels, validated, units)
        if why:
            res.say(f"people: {why}")
        else:
            door = pd.concat([door, people_pairs.assign(judge=people_summary["judge"].iloc[0])],
                             ignore_index=True)[["judge"] + JD.DOOR_COLUMNS]
            door_summary = pd.concat([door_summary, people_summary], ignore_index=True)
    for d in door_summary.itertuples():
        res.say(f"{d.judge}, {d.n_pairs} pairs: relevant {d.relevant_blind} "
                f"({S.fmt_ci(d.share_blind, d.share_blind_lo, d.share_blind_hi)}) blind, {d.relevant_with_metadata} "
                f"({S.fmt_ci(d.share_with_metadata, d.share_with_metadata_lo, d.share_with_metadata_hi)}) with each "
                f"unit's file name and caption shown ({d.gained} gained, "
                f"{d.lost} lost); gains whose file name or caption holds a query word: "
                + (S.fmt_ci(d.gained_with_term, d.gained_with_term_lo, d.gained_with_term_hi) if d.gained else "none")
                + f", the other pairs: {S.fmt_ci(d.others_with_term, d.others_with_term_lo, d.others_with_term_hi)} "
                  "(bootstrap 95%, documents resampled)")

    res.section("page")
    todo = current[~current["adjudicated"]][["query_id", "unit_id"]]
    rest = current[current["adjudicated"]][["query_id", "unit_id"]]
    extra = max(0, labels_page_items - len(todo))
    pick = np.sort(np.random.default_rng([seed, 61]).choice(len(rest), size=min(extra, len(rest)), replace=False))
    page_pairs = pd.concat([todo.head(labels_page_items), rest.iloc[pick]], ignore_index=True)
    if len(page_pairs):
        page = L.labelling_page(page_pairs, validated, units, RUN, RUN / "labelling", seed, title="lookalike — label pages")
        res.say(f"labelling/{page.name}: {len(page_pairs)} pairs ({min(len(todo), labels_page_items)} unadjudicated)")
    else:
        res.say("nothing to label")

    # save
    res.table("pool", pooled, sort_by=["query_id", "unit_id"])
    res.table("rerank_scores_validated", derived.rerank_scores, sort_by=["system", "query_id", "new_rank"])
    res.table("query_splits_validated", derived.splits, sort_by=["system", "query_id", "position"])
    res.table("derived_failed_validated", derived.failed, sort_by=["system", "query_id"])
    res.table("pool_by_system", by_system, sort_by=["system"])
    res.table("labels_current", current, sort_by=["query_id", "unit_id"])
    (RUN / "qrels").mkdir(exist_ok=True)
    if len(qrels):
        trec.write_qrels(qrels, RUN / "qrels" / "labels.qrels")
    res.table("label_agreement", agreement)
    res.table("annotator_agreement", annotator_agreement)
    res.table("judged", judged, sort_by=["system"])
    res.table("judge_door", door, sort_by=["judge", "query_id", "unit_id"] if len(door) else None)
    res.table("judge_door_summary", door_summary)
    kappa = (f"{J.kappa_words(agreement.iloc[0])} "
             f"({model.name} vs {agreement['adjudicator'].iloc[0]}, {int(agreement['n'].iloc[0])} pairs)"
             if len(agreement) else "no adjudication yet")
    people_words = ""
    if len(team_labels):
        among = annotator_agreement[annotator_agreement["scope"].str.startswith("people, overall")].iloc[0]
        people_words = (f" The team labelled {len(team_labels)} times ({team_labels['annotator'].nunique()} people); "
                        f"{among['scope']}: {team.agreement_words(among)}.")
    res.headline(
        f"{len(pooled)} pooled pairs for {len(validated)} validated questions; {int(current['adjudicated'].sum())} "
        f"adjudicated; model pre-labels: {kappa}. {L.provenance(current, agreement)[0][0].upper()}{L.provenance(current, agreement)[0][1:]}."
        + people_words,
        numbers={"pooled pairs": len(pooled), "adjudicated": int(current["adjudicated"].sum()),
                 **({"kappa (model vs adjudicator)": J.kappa_words(agreement.iloc[0])} if len(agreement) else {}),
                 **({"team labels": len(team_labels)} if len(team_labels) else {})},
    )
    return res

