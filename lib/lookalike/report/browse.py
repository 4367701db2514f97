"""The failure browser: outputs/<run>/browse/index.html — one row per (question, system) to see
*why* a number is what it is.

Each row shows the question, its gold page(s), the system's top 5 over the whole corpus with each
page's current label and rank, and — when a look-alike of the gold (a page of its template, or
one of its stage-04 distractors) that is not labelled sufficient ranked above it — the axis on
which that look-alike differs (period / metric / entity / revision, read from the units' metadata
or the distractor table; "other" when the metadata says nothing). Filters: system, outcome,
evidence structure, register, stratum; sorting; a click opens the page image.

The folder stands alone and opens offline: index.html holds the rows as JSON and every thumbnail
as a data URI (no CDN, no request), pages/ the page images a click opens (JPEG, at most 1400
pixels wide, named by position, never by a corpus file name). Corpus text reaches the page only
as JSON read with textContent, so it cannot become markup.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from collections.abc import Mapping, Sequence

import pandas as pd
from PIL import Image

from lookalike.data.schema import resolve_image
from lookalike.eval import ranking
from lookalike.report import images, pages

TOP_K = 5
AXES = ("period", "metric", "entity", "revision")
OUTCOMES = ("sufficient@1", "sufficient@2-5", "supporting-only@5", "neither@5", "hard-negative loss")
FAILURE_COLUMNS = ["query_id", "system", "evidence_structure", "register", "stratum", "gold_unit_ids", "gold_rank",
                   "gold_ranks",
                   "outcome", "hard_negative_loss", "lookalike_unit_id", "lookalike_rank", "axis",
                   "top_unit_ids", "top_labels"]
FULL_WIDTH = 1400
THUMB_WIDTH = 220


def differing_axis(gold: Mapping, other: Mapping) -> str:
    """The metadata axes on which two units differ, '+'-joined in AXES order ('other' when none
    of them is known to differ)."""
    diff = [a for a in AXES if str(gold.get(a, "")).strip() and str(other.get(a, "")).strip()
            and str(gold.get(a, "")) != str(other.get(a, ""))]
    return "+".join(diff) if diff else "other"


def failure_rows(questions: pd.DataFrame, runs: Mapping[str, pd.DataFrame], labels: pd.DataFrame,
                 units: pd.DataFrame, distractors: pd.DataFrame, k: int = TOP_K) -> pd.DataFrame:
    """One row per (question, system) over `questions` (query_id, evidence_unit_ids, and optional
    evidence_structure, register) and `runs` (system -> run frame query_id, unit_id, score over the whole corpus):
    the gold's best rank and each gold page's own rank (gold_ranks, in gold_unit_ids' order; 0: not
    ranked), the outcome (sufficient@1 | sufficient@2-5 | supporting-only@5 |
    neither@5, from the current labels; unlabelled counts as neither), whether a look-alike beat
    the gold and on which axis (FAILURE_COLUMNS)."""
    meta = units.set_index("unit_id")
    template = meta["template_id"].astype(str) if "template_id" in meta.columns else pd.Series(dtype=str)
    stratum = meta["content_type"].astype(str) if "content_type" in meta.columns else pd.Series(dtype=str)
    records = meta.to_dict("index")
    label = {(q, u): lab for q, u, lab in zip(labels["query_id"], labels["unit_id"], labels["label"])}
    axis_of = {(q, u): a for q, u, a in zip(distractors["query_id"], distractors["unit_id"], distractors["axis"])
               if a != "random"}
    rows = []
    for name, run in sorted(runs.items()):
        # the canonical order (score, then trec_eval's tie rule), as every measure reads it
        ranked = ranking.rank(run).groupby("query_id", sort=False)["unit_id"].apply(list).to_dict()
        for q in questions.itertuples(index=False):
            qid = q.query_id
            golds = [u for u in str(q.evidence_unit_ids).split(";") if u]
            order = ranked.get(qid, [])
            pos = {u: i + 1 for i, u in enumerate(order)}
            gold_rank = min((pos[g] for g in golds if g in pos), default=0)
            top = order[:k]
            top_labels = [label.get((qid, u), "unlabelled") for u in top]
            if top_labels[:1] == ["sufficient"]:
                outcome = "sufficient@1"
            elif "sufficient" in top_labels:
                outcome = "sufficient@2-5"
            elif "supporting" in top_labels:
                outcome = "supporting-only@5"
            else:
                outcome = "neither@5"
            gold_templates = {template.get(g, "") for g in golds} - {""}
            above = order[:gold_rank - 1] if gold_rank else order
            loss = next((u for u in above if u not in golds and label.get((qid, u)) != "sufficient"
                         and ((qid, u) in axis_of or template.get(u, "") in gold_templates)), "")
            axis = ""
            if loss:
                axis = axis_of.get((qid, loss)) or differing_axis(records.get(golds[0], {}), records.get(loss, {}))
            rows.append({"query_id": qid, "system": name,
                         "evidence_structure": getattr(q, "evidence_structure", ""), "register": getattr(q, "register", ""),
                         "stratum": stratum.get(golds[0], "") if golds else "", "gold_unit_ids": ";".join(golds),
                         "gold_rank": gold_rank, "gold_ranks": ";".join(str(pos.get(g, 0)) for g in golds), "outcome": outcome, "hard_negative_loss": bool(loss),
                         "lookalike_unit_id": loss, "lookalike_rank": pos.get(loss, 0) if loss else 0, "axis": axis,
                         "top_unit_ids": ";".join(top), "top_labels": ";".join(top_labels)})
    return pd.DataFrame(rows, columns=FAILURE_COLUMNS)


def write_browser(run_dir: Path | str, failures: pd.DataFrame, questions: pd.DataFrame, units: pd.DataFrame,
                  base_dir: Path | str, title: str = "lookalike — failure browser",
                  labels_note: str = "") -> Path:
    """Write outputs/<run>/browse/index.html and browse/pages/ from failure_rows' table."""
    out = Path(run_dir) / "browse"
    if (out / "pages").is_dir():
        shutil.rmtree(out / "pages")                    # an earlier run's pages: numbered differently
    (out / "pages").mkdir(parents=True, exist_ok=True)
    paths = units.set_index("unit_id")["image_path"]
    shown: list[str] = []
    for r in failures.itertuples(index=False):
        for u in (r.gold_unit_ids.split(";") + r.top_unit_ids.split(";")):
            if u and u not in shown:
                shown.append(u)
    shown.sort()
    index = {u: i for i, u in enumerate(shown)}
    thumbs, missing = [], []
    for i, u in enumerate(shown):
        try:
            # each page decoded once for both sizes: decoding is most of what saving the browser costs
            with Image.open(resolve_image(paths[u], base_dir)) as im:
                im.load()
                thumb = images.data_uri(im, THUMB_WIDTH)
                images.save_jpeg(im, out / "pages" / f"{i:06d}.jpg", FULL_WIDTH)
            thumbs.append(thumb)
        except (OSError, KeyError, ValueError) as exc:
            # a page that cannot be read is shown as missing, with the reason; the row stays
            thumbs.append("")
            missing.append({"unit_id": u, "reason": f"{type(exc).__name__}: {exc}"})
    text = dict(zip(questions["query_id"], questions["text"]))
    rows = []
    for r in failures.itertuples(index=False):
        top = [u for u in r.top_unit_ids.split(";") if u]
        rows.append({
            "q": r.query_id, "text": str(text.get(r.query_id, "")), "system": r.system,
            "structure": str(r.evidence_structure), "register": str(r.register), "stratum": str(r.stratum),
            "gold": [index[u] for u in r.gold_unit_ids.split(";") if u in index], "gold_rank": int(r.gold_rank),
            # each gold page's own rank (0: not in the ranking), in the order of "gold"
            "gold_ranks": [int(x) for u, x in zip(r.gold_unit_ids.split(";"), str(r.gold_ranks).split(";"))
                           if u in index],
            "outcome": r.outcome, "loss": bool(r.hard_negative_loss), "axis": r.axis,
            "lookalike": index.get(r.lookalike_unit_id, -1), "lookalike_rank": int(r.lookalike_rank),
            "top": [{"u": index[u], "rank": j + 1, "label": lab} for j, (u, lab) in
                    enumerate(zip(top, r.top_labels.split(";"))) if u in index],
        })
    data = {"rows": rows, "units": shown, "thumbs": thumbs, "missing": [m["unit_id"] for m in missing],
            "outcomes": list(OUTCOMES), "k": TOP_K}
    page = pages.render("browse.html.j2", title=title, data=pages.script_json(data), labels_note=labels_note,
                        n_rows=len(rows), n_questions=failures["query_id"].nunique(),
                        n_systems=failures["system"].nunique(), missing=missing, k=TOP_K)
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def outcome_counts(failures: pd.DataFrame, systems: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows per system and outcome, with the hard-negative losses counted beside them."""
    if failures.empty:
        return pd.DataFrame(columns=["system", *OUTCOMES, "n"])
    t = pd.crosstab(failures["system"], failures["outcome"]).reindex(columns=list(OUTCOMES[:-1]), fill_value=0)
    t["hard-negative loss"] = failures.groupby("system")["hard_negative_loss"].sum().astype(int)
    t["n"] = failures.groupby("system").size()
    t = t.reset_index()
    t.columns.name = None
    return t if systems is None else t[t["system"].isin(systems)]
