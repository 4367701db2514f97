"""``lookalike check PARAMS.yaml``: read and validate everything a run would read, in seconds.

No OCR, no encoding, no page rendering: the corpus source (files, pages, metadata), your
questions, qrels, external runs, human labels, regression reports and blind queries go through
the same readers the stages use, and a configured judge endpoint gets one cheap request. Per
input it prints rows read, rows skipped with their reasons, the page-base evidence of files that
name pages, questions per evidence structure and questions without an answer.

Exit 0: the run can proceed; 1: an input is refused (the message names the file and why);
2: bad parameters. ``make report`` runs it first, so a bad file fails before a long OCR pass.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lookalike import params
from lookalike.analysis import leakage, questions as Q
from lookalike.analysis import negatives
from lookalike.data.schema import CorpusError
from lookalike.io import inputs
from lookalike.io import pagebase
from lookalike.judging import judges
from lookalike.judging import labeldb
from lookalike.retrieval import encoders as E
from lookalike.stages import context, stratify_corpus
from lookalike.vocab import unit_noun

OK, REFUSED, BAD_PARAMS = 0, 1, 2


@dataclass
class Report:
    """What one input gave: name, path, rows read, skipped rows (a frame with a problem column),
    notes (page-base evidence, counts) and, when it was refused, why."""
    name: str
    path: str = ""
    rows: int = 0
    skipped: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)
    refused: str = ""
    heading_only: bool = False      # a section of notes, not an input (no rows to count)

    def lines(self) -> list[str]:
        """The report lines for this input: what was read, what was skipped and why, or why it was refused."""
        head = f"{self.name}{f' ({self.path})' if self.path else ''}: "
        if self.refused:
            return [head + "REFUSED", f"  {self.refused}"]
        if self.heading_only:
            return [head.rstrip(" ")] + [f"  {note}" for note in self.notes]
        out = [head + f"{self.rows} rows read, {len(self.skipped)} skipped"]
        if len(self.skipped) and "problem" in self.skipped.columns:
            # one line per kind of problem, with its first row and id: what to look for in the file
            kinds = self.skipped.assign(kind=self.skipped["problem"].astype(str).str.replace(r"'[^']*'", "'…'", regex=True))
            for why, group in kinds.groupby("kind", sort=False):
                first = group.iloc[0]
                parts = [f"row {first['row']}" if str(first.get("row", "")) != "" else "",
                         f"id {first['unit_id']!r}" if first.get("unit_id", "") else ""]
                where = ", ".join(w for w in parts if w)
                out.append(f"  skipped ×{len(group)}: {why}" + (f" (first: {where}: {first['problem']})" if where else ""))
        out += [f"  {note}" for note in self.notes]
        return out


def _guard(report: Report, fn):
    """Run one reader; a refusal (any error naming the file) is recorded, not raised."""
    try:
        return fn()
    except (CorpusError, judges.JudgeError, ValueError, OSError) as exc:
        report.refused = str(exc)
        return None


def _human_labels(path, unit_ids, page_base, qids) -> tuple[dict, pd.DataFrame]:
    judge = judges.HumanJudge(path, unit_ids, page_base, query_ids=qids or None)
    return judge.labels, judge.skipped


def check_inputs(prm: dict) -> list[Report]:
    """Every input of checked params, read as the run would read it (see the module docstring)."""
    reports: list[Report] = []
    page_base = prm["corpus"]["page_base"]
    with tempfile.TemporaryDirectory() as tmp:
        ctx = context(Path(tmp), prm)
        corpus_report = Report(f"corpus ({prm['corpus']['source']})", str(ctx.path("corpus.root") or
                                                                         ctx.path("corpus.manifest") or ""))
        reports.append(corpus_report)
        corpus = _guard(corpus_report, lambda: stratify_corpus.load_corpus(ctx, render=False))
        if corpus is None:
            return reports
        units = corpus.units
        unit_ids = list(units["unit_id"])
        corpus_report.rows, corpus_report.skipped = len(units), corpus.skipped
        if not len(units):
            first = corpus.skipped["problem"].iloc[0] if len(corpus.skipped) else "the source lists none"
            corpus_report.refused = (f"no unit is left to evaluate: {len(corpus.skipped)} skipped (first: "
                                     f"{corpus.skipped['source'].iloc[0] if len(corpus.skipped) else ''}: {first})")
            return reports
        noun = unit_noun(prm["corpus"]["source"], units["content_type"] if "content_type" in units.columns else ())
        counted = (f"{len(units)} {noun}s, each its own file" if units["doc_id"].nunique() == len(units) and noun != "page"
                   else f"{units['doc_id'].nunique()} documents, {len(units)} {noun}s")
        corpus_report.notes.append(counted + ("" if prm["corpus"]["source"] != "pdf" else " (listed, not rendered)"))
        questions = corpus.questions
        structured = questions        # the questions with their evidence, as the stages will see them

        qpath = ctx.path("corpus.questions")
        if qpath:
            r = Report("questions", str(qpath))
            reports.append(r)
            got = _guard(r, lambda: inputs.read_questions(qpath, prm["corpus"]["question_columns"],
                                                     prm["corpus"]["question_ids"]))
            if got is not None:
                mine, r.skipped = got
                r.rows = len(mine)
                no_answer = sum(map(Q.lacks_answer, mine.get("answer", pd.Series([""] * len(mine))).tolist()))
                r.notes.append(f"{no_answer} questions without an answer, or with one saying no page answers ('N/A'): "
                               "a judge that needs one skips them")
                questions = mine
        rpath = ctx.path("corpus.qrels")
        if rpath and qpath and questions is not None:
            r = Report("qrels", str(rpath))
            reports.append(r)
            level = prm["corpus"]["qrels_level"]
            got = _guard(r, lambda: inputs.read_judgements(rpath, unit_ids, questions["query_id"], level, page_base,
                                                      doc_ids=units["doc_id"].unique()))
            if got is not None:
                qrels, r.skipped = got
                r.rows = len(qrels)
                raw = [u for _, _, u, _ in inputs.judgement_rows(rpath)]     # TREC lines or a CSV / TSV with a header
                if level == "page":
                    r.notes.append(f"page base declared {page_base}; {pagebase.evidence(raw, unit_ids)}")
                structured = inputs.as_questions(questions, qrels, units, level)
                counts = structured["evidence_structure"].replace("", "(no evidence)").value_counts().sort_index()
                r.notes.append("questions per evidence structure: " + ", ".join(f"{k} {v}" for k, v in counts.items()))

        qids = list(questions["query_id"]) if questions is not None and len(questions) else []
        for spec in prm["retrieve"]["external_runs"]:
            name, _, path = (x.strip() for x in str(spec).partition("="))
            r = Report(f"run {name}", path)
            reports.append(r)
            got = _guard(r, lambda: inputs.read_external_run(params.repo_file(path), unit_ids, qids, page_base))
            if got is not None:
                run, r.skipped = got
                r.rows = len(run)
                r.notes.append(f"{run['query_id'].nunique()} questions ranked")
        for key, name, read in (
                ("validate.labels", "human labels", lambda p: _human_labels(p, unit_ids, page_base, qids)),
                ("validate.regressions", "regression reports", lambda p: inputs.read_regressions(p, unit_ids, page_base)),
                ("leak.blind_queries", "blind queries", lambda p: leakage.read_blind_queries(p, units, ctx.seed, page_base))):
            found = ctx.path(key)
            if not found:
                continue
            r = Report(name, str(found))
            reports.append(r)
            got = _guard(r, lambda: read(found))
            if isinstance(got, tuple):
                r.rows, r.skipped = len(got[0]), got[1]
            elif got is not None:
                r.rows = len(got)
        plugins_load = True
        for spec in [s for s in prm["encode"]["encoders"] if E.is_plugin(s)]:
            # one loader (registry.load_plugin) and its refusals; importing the file runs its code, here too
            r = Report("encoder plug-in", str(spec))
            reports.append(r)
            cls = _guard(r, lambda spec=spec: E.encoder_class(spec))
            plugins_load &= cls is not None
            if cls is not None:
                r.heading_only = True
                r.notes.append(f"system {cls.name} ({cls.provenance}, {cls.kind}); its module ran to be checked, its "
                               "constructor runs in stage 02")
        r = Report("mining.retriever", str(prm["mining"]["retriever"]))
        ranked = _guard(r, lambda: run_systems(prm, units["doc_id"] if "doc_id" in units else ())) if plugins_load else None
        if ranked is not None and prm["mining"]["retriever"] not in ranked:
            r.refused = (f"mining.retriever {prm['mining']['retriever']!r} is not a system this run ranks "
                         f"({', '.join(sorted(ranked))}); stage 08 mines that system's rankings — name one of them")
        if r.refused:
            reports.append(r)
        reports += _team_database(prm)
        plan = Report("what each stage will do", heading_only=True)
        plan.notes = stage_plan(prm, units, structured, getattr(corpus, "answer_key", None))
        reports.append(plan)
        named = {prm["validate"]["judge"], prm["validate"]["compare_judge"], prm["labels"]["model_judge"],
                 prm["mining"]["judge"], prm["mining"]["compare_judge"]} - {"", "auto", "none"}
        # a plug-in judge that needs the endpoint is asked about it as the built-in one is
        if any(judges.REGISTRY[judges.resolve_name(n)].capabilities.needs_endpoint for n in named):
            reports.append(_endpoint(prm["judges"]["url"], prm["judges"]["model"]))
    return reports


def run_systems(prm: dict, doc_ids=()) -> set[str]:
    """The systems a run with these parameters ranks: each encoder's, the fusions its encoders make,
    document context, your runs, and the +rerank / +split systems it names."""
    from lookalike.retrieval import catalog, systems

    base = [E.system_name(spec) for spec in prm["encode"]["encoders"]]
    names = set(base) | {str(spec).partition("=")[0].strip() for spec in prm["retrieve"]["external_runs"]}
    encoded = [n for n in base if E.answers_queries(n)]      # appearance answers no query (systems.base_systems)
    names |= set(catalog.plan(encoded, {n: systems.declared_provenance(n) for n in encoded}, "08", doc_ids).built)
    names |= {f"{s}+rerank" for s in prm["rerank"]["systems"]} | {f"{s}+split" for s in prm["split"]["systems"]}
    return names


def stage_plan(prm: dict, units: pd.DataFrame, questions: pd.DataFrame | None, answer_key=None) -> list[str]:
    """What each stage will do with these inputs: runs (and on what), or skips and why."""
    demo = prm["corpus"]["source"] == "demo"
    qs = questions if questions is not None else pd.DataFrame(columns=["query_id", "answer", "evidence_unit_ids"])
    has_pages = qs.get("evidence_unit_ids", pd.Series([""] * len(qs), dtype=str)).astype(str).str.strip() != ""
    no_answer = sum(map(Q.lacks_answer, qs.get("answer", pd.Series([""] * len(qs), dtype=str)).tolist()))
    judge = judges.resolve_name(prm["validate"]["judge"], answer_key if demo else None)
    needs_answer = judges.REGISTRY[judge].capabilities.needs_answer
    templates = (units["template_id"].astype(str) != "").sum() if "template_id" in units.columns else 0
    encoders = ", ".join(map(str, prm["encode"]["encoders"]))
    lines = [f"01_stratify_corpus: runs on {len(units)} units",
             f"02_encode: runs {encoders}" + (f" and reads {len(prm['retrieve']['external_runs'])} run(s) of yours"
                                              if prm["retrieve"]["external_runs"] else "")
             + (f"; ranks {len(qs)} questions" if len(qs) else "; no questions, so nothing is ranked")]
    if prm["leak"]["blind_queries"]:
        lines.append("03_leak_ablation: runs the metadata probe, and the retrieval half on your blind queries")
    elif demo:
        lines.append("03_leak_ablation: runs the metadata probe, and the retrieval half on the demo's blind queries")
    else:
        lines.append("03_leak_ablation: runs the metadata probe only; the retrieval half is NOT EVALUATED (no "
                     "leak.blind_queries: off the demo, blind queries must be written by someone who has not read "
                     "the captions)")
    golds = sorted({u for ids in qs.get("evidence_unit_ids", pd.Series(dtype=str)).astype(str) for u in ids.split(";") if u})
    planned = negatives.planned_methods(units, golds or list(units.get("unit_id", [])))
    words = {"per-axis": "per-axis pools", "template": "the gold's template (no axis of a per-axis pool is filled)",
             "cluster": "its appearance cluster (no template names its look-alikes)"}
    lines.append(f"04_hard_negatives: look-alikes for the {sum(planned.values())} {'gold units' if golds else 'units'} "
                 f"(template metadata on {templates} of {len(units)} units): "
                 + "; ".join(f"{n} by {words[m]}" for m, n in planned.items()) if planned else
                 "04_hard_negatives: no units to find look-alikes for")
    if not int(has_pages.sum()):
        lines.append("05_validate_questions: nothing to validate (no question names evidence pages); stages 06–08 "
                     "have no validated questions to pool, score or mine")
    else:
        said = f"05_validate_questions: checks {int(has_pages.sum())} questions with evidence pages against their look-alikes ({judge})"
        if needs_answer and no_answer:
            said += (f"; {no_answer} have no answer (or one that says none): distractor check not run for them ({judge} "
                     "needs an answer)" + ("; they stay in the main set as people judged them" if not demo else ""))
        lines.append(said)
        lines += ["06_judge_pool: pools every system's top "
                  f"{prm['labels']['pool_depth']} per validated question, pre-labels with "
                  f"{judges.resolve_name(prm['labels']['model_judge'])}, "
                  "writes the labelling page",
                  "07_metric_tables: scores the validated questions against the labels and your evidence pages",
                  f"08_mined_candidates: mines {prm['mining']['retriever']}'s rankings, judged by "
                  f"{judges.resolve_name(prm['mining']['judge'], answer_key if demo else None)}"]
    return lines


def _team_database(prm: dict) -> list[Report]:
    """The team label database stage 06 would read (labels.db, else outputs/<run>/labels/labels.sqlite
    when it exists), opened without changing it: a file that is not one, a newer schema, a server that
    does not answer or a missing driver is refused here rather than in stage 06."""
    run_dir = params.PROJECT_ROOT / "outputs" / prm["run"]
    target = labeldb.resolve(prm["labels"]["db"], run_dir)
    postgres = target.startswith(("postgresql://", "postgres://"))
    try:
        is_file = not postgres and Path(target).is_file()
    except OSError as exc:          # a name the file system refuses (too long, say) is the user's to fix
        r = Report("team label database", target)
        r.refused = f"labels.db: {target!r} cannot be a file here ({exc.strerror or exc})"
        return [r]
    if not prm["labels"]["db"] and not is_file:
        return []
    r = Report("team label database", labeldb.describe(target, params.PROJECT_ROOT))
    if not postgres and not is_file:
        r.notes.append("not created yet: `lookalike labels serve` creates it after stage 06")
        return [r]
    got = _guard(r, lambda: labeldb.LabelDB(target, migrate=False).inspect())
    if got is not None:
        r.rows = got["labels"]
        r.notes.append(f"schema version {got['version']}" + (" (will be upgraded when opened)"
                                                            if got["version"] < labeldb.SCHEMA_VERSION else "")
                       + f"; {got['pairs']} pairs, {got['labels']} live labels from {got['people']} people")
    return [r]


def _endpoint(url: str, model: str) -> Report:
    """One cheap request to the judge endpoint: GET {url}/models, and whether it serves the model."""
    r = Report("judge endpoint", url)
    if not url or not model:
        r.refused = "the openai-compatible judge needs judges.url and judges.model"
        return r
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=5) as resp:
            served = [m.get("id", "") for m in json.loads(resp.read().decode("utf-8")).get("data", [])]
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        r.refused = f"{url}/models did not answer: {exc}"
        return r
    r.rows = len(served)
    if model not in served:
        r.refused = f"{url} serves {', '.join(served) or 'no models'}; judges.model {model!r} is not among them"
    else:
        r.notes.append(f"serves {model!r}")
    return r


def main(argv: list[str] | None = None) -> int:
    """``lookalike check PARAMS``: read every input a run would read and report per file; exit 1 when one is
    refused."""
    ap = argparse.ArgumentParser(prog="lookalike check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("params", help="run parameter file (deep-merged over params/base.yaml)")
    args = ap.parse_args(argv)
    try:
        prm = params.load_params(args.params)
    except params.ParamsError as exc:
        print(f"lookalike check: {exc}")
        return BAD_PARAMS
    reports = check_inputs(prm)
    for r in reports:
        print("\n".join(r.lines()))
    refused = [r for r in reports if r.refused]
    print(f"check: {len([r for r in reports if not r.heading_only])} inputs, {len(refused)} refused"
          + (" — fix the refused inputs before the run" if refused else " — the run can proceed"))
    return REFUSED if refused else OK
