"""Stage 04 · hard negatives: distractors per axis for every gold unit (same template, one fact apart,
nearest by appearance), pool sizes, and top-1 under random / hard / whole-corpus negatives, each
with its own n and CI; document-level negatives when the judgements are per document.
"""

from __future__ import annotations

from pathlib import Path


import numpy as np
import pandas as pd
from lookalike.analysis import negatives as N
from lookalike.retrieval import systems
from lookalike.retrieval.encoders.base import Vectors

from lookalike.report import charts, images
from lookalike.stages.base import Section, StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

STAGE = "04_hard_negatives"
TITLE = 'Hard negatives'


def run(ctx: StageContext) -> StageResult:
    """Stage 04, in the order its notebook shows them: distractors, montage, top1, top1_chart, ladder,
    documents, then the headline. Reads and writes what lookalike.stages.contracts.CONTRACTS["04_hard_negatives"] declares."""
    cfg = ctx.config
    res = ctx.result(STAGE, TITLE)

    units = ctx.units()
    questions = ctx.table("questions")
    if not (ctx.run_dir / "vectors" / "appearance.npz").is_file():
        raise FileNotFoundError(f"{ctx.run_dir / 'vectors' / 'appearance.npz'} is missing: stage 04 picks distractors by "
                                "appearance; keep 'appearance' in encode.encoders")
    appearance = Vectors.load(ctx.run_dir / "vectors" / "appearance.npz")
    assert appearance.ids == list(units["unit_id"]), "vectors/appearance.npz does not match tables/units.csv"
    has_metadata = bool((units["template_id"] != "").any())

    settings = dict(ctx.encoder_settings(), run_dir=ctx.run_dir)
    pixel = systems.pixel_systems(ctx.run_dir, cfg.encode.encoders)
    hard, rand, method, summary = res.add(*distractors_section(
        questions, units, appearance, has_metadata, cfg.negatives, cfg.seed, ctx.optional_table("sample"),
        ctx.optional_table("duplicates")))
    res.add(*montage_section(hard, rand, cfg.negatives.k, units, ctx.run_dir))
    gold, sets, top1_table, harder = res.add(*top1_section(
        questions, hard, rand, units, pixel, settings, ctx.clusters, cfg.seed, method, ctx.run_dir))
    res.add(*top1_chart_section(top1_table))
    res.add(*ladder_section(gold, has_metadata, units, sets, cfg.seed, ctx.clusters))
    doc_table = res.add(*documents_section(ctx.optional_table("qrels"), units, questions, pixel, settings, cfg.seed,
                                           ctx.run_dir))
    res.add(*headline_section(top1_table, doc_table, hard, harder, summary, has_metadata))
    return res


def distractors_section(questions: pd.DataFrame, units: pd.DataFrame, appearance: Vectors, has_metadata: bool,
                        negatives, seed: int, sample: pd.DataFrame | None,
                        copies: pd.DataFrame | None) -> tuple[Section, pd.DataFrame, pd.DataFrame, str, pd.DataFrame]:
    """Distractors per gold page: its look-alikes on each axis (same template, one field changed, or
    nearest by appearance when the corpus names no templates) and random pages; byte-identical copies left out.
    Writes distractors, pool_sizes, pool_summary, distractor_similarity."""
    sec = Section(STAGE, "distractors")
    golds = sorted({u for ids in questions["evidence_unit_ids"] for u in ids.split(";") if u})
    negatives_k, negatives_clusters, negatives_random = negatives.k, negatives.clusters, negatives.random
    preview = not golds and sample is not None
    if preview and sample is not None:
        # no questions with evidence pages: show what the distractors of the sampled units would be
        golds = sorted(sample["unit_id"])
        sec.say(f"no questions with evidence pages: distractors of the {len(golds)} sampled units, as a preview")
    hard, pool_sizes = N.look_alikes(units, appearance.data, golds, negatives_k, negatives_clusters,
                                     negatives.cluster_k, seed)
    rand = N.random_negatives(units, golds, negatives_random, seed)
    distractors = N.for_questions(questions, pd.concat([hard, rand], ignore_index=True))
    distractors, dropped = N.without_copies(distractors, copies)
    if len(dropped):
        sec.say(f"{len(dropped)} distractors left out: byte-identical copies of their gold page "
                f"({', '.join(sorted(set(dropped['unit_id']))[:10])}; tables/duplicates.csv)")
    summary = N.pool_summary(pool_sizes)
    clustered = sorted(set(hard.loc[hard["axis"] == "cluster", "gold_unit_id"]))
    method = ("per-axis pools: pages of the gold's template that differ in one field (template_id metadata)"
              if has_metadata and not clustered else
              f"appearance clustering ({negatives_clusters} clusters, the {negatives.cluster_k} nearest of the gold's "
              "cluster): the corpus has no template_id metadata, so per-axis pools cannot be formed (a "
              "corpus.name_pattern without a template group falls back here)" if not has_metadata else
              f"per-axis pools where the gold's template has other pages; for the {len(clustered)} of {len(golds)} gold "
              f"pages without one (no template_id, or a template of one page), appearance clustering "
              f"({negatives_clusters} clusters, the {negatives.cluster_k} nearest of the gold's cluster)")
    closeness = N.similarity_to_gold(pd.concat([hard, rand], ignore_index=True), units, appearance.data)
    with pd.option_context("display.float_format", "{:.2f}".format):
        sec.say(f"gold units: {len(golds)}; hard distractors: {len(hard)}; random negatives: {len(rand)}")
        sec.say(f"distractor method: {method}")
        sec.say(summary.to_string(index=False))
        sec.say("\nappearance similarity to the gold, by kind of distractor:")
        sec.say(closeness.to_string(index=False) if len(closeness) else "no distractors")
    sec.table("distractors", distractors)
    sec.table("pool_sizes", pool_sizes, sort_by=["gold_unit_id", "axis"])
    sec.table("pool_summary", summary, sort_by=["axis"])
    sec.table("distractor_similarity", closeness, sort_by=["axis"])
    return sec, hard, rand, method, summary


def montage_section(hard, rand, negatives_k, units: pd.DataFrame, run_dir: Path) -> tuple[Section]:
    """A montage of a gold page beside its hard and random distractors."""
    sec = Section(STAGE, "montage")
    if len(hard):
        example = hard.groupby("gold_unit_id")["axis"].nunique().sort_values(ascending=False, kind="mergesort").index[0]
        sec.say("gold:", example)
        shown = pd.concat([hard, rand[rand["gold_unit_id"] == example].head(negatives_k)])
        sec.figure("04_montage", images.distractor_montage(example, shown, units, run_dir, N.MONTAGE_AXES))
    else:
        sec.say("no gold units with distractors (no questions, or no template metadata)")
    return (sec,)


def top1_section(questions: pd.DataFrame, hard: pd.DataFrame, rand: pd.DataFrame, units: pd.DataFrame, pixel: list,
                 settings: dict, clusters_of, seed: int, method: str,
                 run_dir: Path) -> tuple[Section, dict, dict, pd.DataFrame, str]:
    """Top-1 of each system against hard and against random negatives, and per system whether the hard set
    is measurably harder (paired difference with its CI). Writes top1_negatives, hard_vs_random."""
    sec = Section(STAGE, "top1")
    single = questions[questions["evidence_structure"] == "page-single"].reset_index(drop=True)
    gold = dict(zip(single["query_id"], single["evidence_unit_ids"]))
    by_gold_hard = hard.groupby("gold_unit_id")["unit_id"].apply(list).to_dict()
    by_gold_rand = rand.groupby("gold_unit_id")["unit_id"].apply(list).to_dict()
    unit_vectors = {name: Vectors.load(run_dir / "vectors" / f"{name}.npz") for name in pixel}
    query_vectors = systems.encode_queries(single, list(unit_vectors), **settings) if len(single) else {}
    sets = {"random": {q: by_gold_rand.get(g, []) for q, g in gold.items()},
            "hard": {q: by_gold_hard.get(g, []) for q, g in gold.items()},
            "corpus": {q: None for q in gold}}
    unit_ids, query_ids = list(units["unit_id"]), list(single["query_id"])
    outcomes = {name: N.top1_outcomes(systems.score_rows(unit_vectors[name], query_vectors[name]), unit_ids,
                                      query_ids, gold, sets) for name in unit_vectors} if len(single) else {}
    top1_table = N.top1_table(outcomes, unit_ids, gold, sets, seed, clusters=clusters_of(gold))
    harder = ""
    # per system: is the hard set measurably harder than random negatives (paired top-1 difference)?
    harder_rows, by_system = [], {}
    for name in sorted(outcomes):
        hs = by_system[name] = N.harder(outcomes[name], "random", "hard", seed, clusters=clusters_of(gold))
        harder_rows.append({"system": name, "n": hs["n"], "difference": hs["difference"], "difference_lo": hs["lo"],
                            "difference_hi": hs["hi"], "harder": hs["harder"], "method": method})
    harder_table = pd.DataFrame(harder_rows, columns=["system", "n", "difference", "difference_lo", "difference_hi",
                                                      "harder", "method"])
    if "ocr-bm25" in by_system:
        h = by_system["ocr-bm25"]
        if not h["n"]:
            sec.say("random − hard top-1 of ocr-bm25: not measured (no question has both kinds of negatives)")
            harder = " Whether the hard set is harder than random negatives was not measured: no question has both."
        else:
            sec.say(f"random − hard top-1 of ocr-bm25, paired over {h['n']} questions: {h['difference']:+.2f} "
                    f"[{h['lo']:+.2f}, {h['hi']:+.2f}]")
        rand = (top1_table[top1_table["negatives"] == "random"].set_index("system") if len(top1_table)
                else pd.DataFrame())
        at_chance = "ocr-bm25" in rand.index and float(rand.loc["ocr-bm25", "top1_lo"]) <= float(
            rand.loc["ocr-bm25", "chance"])
        if h["n"] and at_chance:
            # a system that finds nothing against random pages cannot be asked whether look-alikes are harder
            r = rand.loc["ocr-bm25"]
            harder = (f" ocr-bm25 is at chance against random negatives (top-1 {r['top1']:.2f} [{r['top1_lo']:.2f}, "
                      f"{r['top1_hi']:.2f}], chance {r['chance']:.2f}): whether the hard set is harder is not asked "
                      "of it.")
        elif h["n"] and not h["harder"]:
            harder = (f" The hard set is not measurably harder than random negatives here (paired top-1 difference "
                      f"{h['difference']:+.2f} [{h['lo']:+.2f}, {h['hi']:+.2f}] over {h['n']} questions): read the "
                      "hard-negative figures with that in mind.")
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(top1_table.to_string(index=False, na_rep="·") if len(top1_table) else "no page-single questions to score")
    sec.html_table("top1", top1_table)
    sec.table("top1_negatives", top1_table, sort_by=["system", "negatives"])
    sec.table("hard_vs_random", harder_table, sort_by=["system"])
    return sec, gold, sets, top1_table, harder


def top1_chart_section(top1_table) -> tuple[Section]:
    """The chart of top-1 under hard against random negatives, per system."""
    sec = Section(STAGE, "top1_chart")
    chart = None if top1_table.empty else charts.top1(
        top1_table, "Top-1: random negatives, hard negatives, whole corpus (own n and CI each)")
    sec.figure("04_top1", chart)
    return (sec,)


def ladder_section(gold: dict, has_metadata: bool, units: pd.DataFrame, sets: dict, seed: int,
                   clusters_of) -> tuple[Section, pd.DataFrame]:
    """The validity ladder: synthetic systems that differ only in how often they rank the right
    look-alike first, scored under random and under hard negatives (or why there are no look-alikes to rank).
    Writes validity_ladder."""
    sec = Section(STAGE, "ladder")
    # the ladder's siblings are pages of the gold's template: without template metadata there are none to rank
    ladder = (N.validity_ladder(units, gold, {"random": sets["random"], "hard": sets["hard"]}, seed,
                                clusters=clusters_of(gold)) if gold and has_metadata
              else pd.DataFrame(columns=N.LADDER_COLUMNS))
    slopes = N.ladder_slopes(ladder) if len(ladder) else {}
    with pd.option_context("display.float_format", "{:.3f}".format):
        if not has_metadata:
            sec.say("no template metadata: the ladder's look-alikes are pages of the gold's template, so it is not run")
        elif len(ladder):
            sec.say("synthetic systems that always rank the gold's template first, then the right look-alike first "
                    "with probability p (else another look-alike), on the page-single questions:")
            sec.say(ladder.pivot_table(index="p", columns="negatives", values="top1").to_string(na_rep="·"))
            sec.say("least-squares slope of top-1 on p: "
                    + ", ".join(f"{k} {v:+.2f}" if v == v else f"{k} not measured (fewer than two rungs with questions)"
                                for k, v in sorted(slopes.items())))
        else:
            sec.say("no page-single questions: no ladder")
    sec.figure("04_validity_ladder", charts.validity_ladder(ladder) if len(ladder) else None)
    sec.table("validity_ladder", ladder, sort_by=["negatives", "p"])
    return sec, ladder


def documents_section(given: pd.DataFrame | None, units: pd.DataFrame, questions: pd.DataFrame, pixel: list,
                      settings: dict, seed: int, run_dir: Path) -> tuple[Section, pd.DataFrame]:
    """Document-level questions (your judgements name documents, one relevant each): top-1 over documents
    under hard negatives (same company, other period) and random ones. Writes top1_documents."""
    sec = Section(STAGE, "documents")
    doc_table = pd.DataFrame(columns=N.TOP1_COLUMNS)
    if given is not None and len(given) and (given["level"] == "document").all():
        rel = given[given["relevance"] > 0].groupby("query_id")["unit_id"].apply(list)
        doc_gold = {q: d[0] for q, d in rel.items() if len(d) == 1}
        docs = units.groupby("doc_id", sort=True)[["entity", "period"]].first().reset_index()
        d_hard, d_rand = N.document_negatives(docs, doc_gold, seed)
        doc_q = questions[questions["query_id"].isin(doc_gold)].reset_index(drop=True)
        names = list(pixel)
        if len(doc_q) and names:
            vecs = {n: Vectors.load(run_dir / "vectors" / f"{n}.npz") for n in names}
            qv = systems.encode_queries(doc_q, names, **settings)
            sets = {"random": {q: d_rand[q] for q in doc_q["query_id"]}, "hard": {q: d_hard[q] for q in doc_q["query_id"]},
                    "corpus": {q: None for q in doc_q["query_id"]}}
            doc_ids = sorted(set(units["doc_id"]))
            doc_outcomes = {}
            for n in names:
                pages = systems.score_rows(vecs[n], qv[n])
                doc_outcomes[n] = N.top1_outcomes(lambda rows, pages=pages: N.document_scores(pages(rows), units["doc_id"])[0],
                                                  doc_ids, list(doc_q["query_id"]), doc_gold, sets)
            doc_table = N.top1_table(doc_outcomes, doc_ids, doc_gold, sets, seed)
        sec.say(f"document-level questions with one relevant document: {len(doc_gold)} of {len(rel)}; "
              f"mean hard negatives per question: {np.mean([len(v) for v in d_hard.values()]) if d_hard else 0:.1f}")
        with pd.option_context("display.float_format", "{:.3f}".format):
            sec.say(doc_table.to_string(index=False) if len(doc_table) else "nothing to score")
    else:
        sec.say("judgements are not document-level: nothing to do here")
    sec.table("top1_documents", doc_table, sort_by=["system", "negatives"])
    return sec, doc_table


def headline_section(top1_table: pd.DataFrame, doc_table: pd.DataFrame, hard: pd.DataFrame, harder: str,
                     summary: pd.DataFrame, has_metadata: bool) -> tuple[Section]:
    """What index.html says of stage 04: ocr-bm25's top-1 against random, hard and corpus negatives (pages,
    else documents), how distractors were picked, whether hard negatives are harder, the mean pool per axis."""
    sec = Section(STAGE, "headline")
    method_said = " Distractors: " + ("per-axis pools." if has_metadata else "appearance clustering (no template metadata).")
    r = top1_table.set_index(["system", "negatives"])
    d = doc_table.set_index(["system", "negatives"])

    def fig(t: pd.DataFrame, neg: str) -> str:
        # each rate with its interval and what a random ranking of the same candidates scores
        row = t.loc[("ocr-bm25", neg)]
        if not row["top1"] == row["top1"]:
            return f"{neg} not measured (no question has such negatives)"
        return (f"{neg} {row['top1']:.2f} [{row['top1_lo']:.2f}, {row['top1_hi']:.2f}] (chance {row['chance']:.2f},"
                f" n = {int(row['n'])})")

    sentence = ("Top-1 of ocr-bm25: " + ", ".join(fig(r, neg) for neg in ("random", "hard", "corpus"))
                + " — each against its own negatives (questions as generated; stage 05 repeats it on validated ones)."
                if ("ocr-bm25", "hard") in r.index else
                "Document top-1 of ocr-bm25: " + ", ".join(fig(d, neg) for neg in ("random", "hard", "corpus"))
                + " — same company, other period as the hard negatives." if ("ocr-bm25", "hard") in d.index
                else f"{len(hard)} hard distractors; no page-single questions scored.") + method_said + harder
    sec.headline(
        sentence,
        figure="04_top1" if len(top1_table) else "",
        numbers={f"{a} pool (mean)": f"{m:.1f}" for a, m in zip(summary["axis"], summary["mean_pool"])},
    )
    return (sec,)



