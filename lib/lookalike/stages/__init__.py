"""One function per stage: ``lookalike.stages.<stage>.run(ctx) -> StageResult``.

The notebooks in notebooks/ call these (one call each) and show what they return; the runner
executes the notebooks with papermill; tests call the functions directly. STAGES maps each
stage notebook to its module.
"""

from lookalike.stages.base import StageContext, StageResult, context

STAGES = {
    "01_stratify_corpus": "stratify_corpus",
    "02_encode": "encode",
    "03_leak_ablation": "leak_ablation",
    "04_hard_negatives": "hard_negatives",
    "05_validate_questions": "validate_questions",
    "06_judge_pool": "judge_pool",
    "07_metric_tables": "metric_tables",
    "08_mined_candidates": "mined_candidates",
}

__all__ = ["STAGES", "StageContext", "StageResult", "context"]
