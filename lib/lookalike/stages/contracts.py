"""What each stage reads from the run folder and what it writes there, declared in one place.

Stages talk to one another only through the run folder: tables (tables/NAME.csv, written by
StageResult.save) and a few other files (vectors, runs, qrels, the label store, the pages people
open). Each stage's contract names the tables it reads and writes and the other paths it writes.
Three checks hold them to it:

- tests/stages/test_contracts.py reads every stage's source: the tables it reads and writes must be the
  ones declared, and every table a stage reads must be written by an earlier stage;
- StageResult.save refuses to write a table its stage did not declare;
- the runner compares the files each stage created with its declared paths (``undeclared_files``)
  and stops a run whose stage wrote anything else when LOOKALIKE_STRICT_CONTRACTS is set (the
  test suite sets it; a user's run reports the file and goes on).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch


@dataclass(frozen=True)
class Contract:
    """What a stage reads from earlier stages, what tables it writes, and which other run-folder files."""
    module: str                       # lookalike.stages.<module>
    reads: frozenset[str]             # tables of earlier stages (tables/NAME.csv)
    writes: frozenset[str]            # tables this stage writes
    files: tuple[str, ...] = ()       # other run-folder paths it writes (fnmatch patterns, '/' included in '*')


def _c(module: str, reads: str, writes: str, files: tuple[str, ...] = ()) -> Contract:
    return Contract(module, frozenset(reads.split()), frozenset(writes.split()), files)


# store/ holds what one stage computed and later stages reuse (OCR text per unit, question vectors):
# whichever stage first needs an entry writes it
_STORE = ("store/*",)

CONTRACTS: dict[str, Contract] = {
    "01_stratify_corpus": _c(
        "stratify_corpus", "",
        "answer_key duplicates facts planted qrels questions sample skipped strata units visible",
        ("corpus/*",)),
    "02_encode": _c(
        "encode", "units questions qrels",
        "derived_failed encoders query_splits rerank_scores systems",
        ("vectors/*", "runs/*", "qrels/evidence.qrels") + _STORE),
    "03_leak_ablation": _c(
        "leak_ablation", "units facts planted visible",
        "judged_10 judgements judging_key judging_sheet leak_ablation leak_ablation_systems leak_blind_dropped "
        "leak_breakdown_register leak_breakdown_stratum leak_caption_overlap leak_gate leak_per_query leak_planted "
        "leak_queries",
        ("html/03_judging_sheet.html", "html/03_judging_sheet_images/*") + _STORE),
    "04_hard_negatives": _c(
        "hard_negatives", "units duplicates questions sample qrels",
        "distractor_similarity distractors hard_vs_random pool_sizes pool_summary top1_documents top1_negatives "
        "validity_ladder",
        _STORE),
    "05_validate_questions": _c(
        "validate_questions", "units answer_key distractors facts questions top1_negatives",
        "judge_agreement question_cleaning question_cleaning_summary question_validation questions_validated "
        "regression_skipped regression_slice regression_summary top1_validated validation_judgements "
        "validation_tallies",
        _STORE),
    "06_judge_pool": _c(
        "judge_pool", "units answer_key distractors facts planted qrels questions_validated systems",
        "annotator_agreement derived_failed_validated judge_door judge_door_summary judged label_agreement "
        "labels_current pool pool_by_system query_splits_validated rerank_scores_validated",
        ("labelling/*", "labels/*", "qrels/labels.qrels", "runs_validated/*") + _STORE),
    "07_metric_tables": _c(
        "metric_tables",
        "units annotator_agreement distractors hard_vs_random judge_door_summary label_agreement labels_current "
        "leak_gate leak_per_query "
        "leak_planted planted question_validation questions questions_validated systems validation_judgements "
        "validity_ladder",
        "breakdown evidence_complete failures fusion_trace fusion_trace_counts hard_sets haystack_curve headline kinds "
        "planted_effects recall_all_by_source sample_size settings significance sufficiency top1_random_original",
        ("browse/*", "qrels/evidence_validated.qrels", "runs_hard/*", "summary.html", "claims.json") + _STORE),
    "08_mined_candidates": _c(
        "mined_candidates", "units answer_key facts label_agreement questions questions_validated",
        "incompleteness mined_agreement mined_candidates mined_judgements negative_rules negative_rules_by_judge "
        "negatives_chosen score_shape",
        ("qrels/mined.qrels", "training/*") + _STORE),
}
STAGES = tuple(CONTRACTS)

# what the runner writes around every stage: its notebook, HTML, headline, figures, timings, the site
RUNNER_FILES = ("index.html", "manifest.json", "notebooks/{stage}.ipynb", "html/{stage}.html",
                "html/{stage}.report.html", "headlines/{stage}.json", "figures/{n}_*", "timings/*")


class ContractError(RuntimeError):
    """A stage wrote a table or file its contract does not declare (a bug in lookalike, not in the input)."""


def unmet_reads(contracts: dict[str, Contract]) -> list[str]:
    """Each table a stage reads that no earlier stage writes, in words."""
    written: set[str] = set()
    out = []
    for stage, c in contracts.items():
        out += [f"{stage} reads tables/{t}.csv, which no earlier stage writes" for t in sorted(c.reads - written)]
        written |= c.writes
    return out


def undeclared_tables(stage: str, tables) -> list[str]:
    """The tables among these that the stage's contract does not declare (none for an unknown stage)."""
    c = CONTRACTS.get(stage)
    return [] if c is None else sorted(set(tables) - c.writes)


def undeclared_files(stage: str, paths) -> list[str]:
    """The run-folder paths (relative, '/'-separated) among these that neither the stage's contract nor
    the runner declares: tables/NAME.csv or .parquet of declared tables, the stage's files, the runner's."""
    c = CONTRACTS.get(stage)
    if c is None:
        return []
    allowed = [p.format(stage=stage, n=stage[:2]) for p in RUNNER_FILES] + list(c.files)
    allowed += [f"tables/{t}.{ext}" for t in c.writes for ext in ("csv", "parquet")]
    return sorted(p for p in paths if not any(fnmatch(p, pattern) for pattern in allowed))
