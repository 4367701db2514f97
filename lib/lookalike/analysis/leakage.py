"""The leak ablation: image / caption / both indexes × blind / caption-derived queries.

Metadata leaks into an image-retrieval evaluation through three doors: the index (vectors built
from text describing the image), the queries (written from the captions) and the judgements (a
judge who sees the file name). The ablation closes or opens each on purpose:

  indexes   image    the pixels-only encoder (ocr-minilm); accepts provenance ``pixels`` only
            caption  the caption fields through the same text model (caption-minilm)
            both     the normalised sum of the two vectors
  queries   blind            written from what the page visibly shows (the demo's tables/visible.csv:
                             colour, layout, printed values, printed lines, the printed period) by
                             a code path never handed the caption fields
            caption-derived  deterministic paraphrases of the unit's caption (synonyms, reordering)
  Both query sets are built for the same target units, in the same register (a seeded draw per
  unit), and go through the same paraphrase; stage 03 reports each set's token overlap with the
  caption fields (``caption_overlap``). On the demo the planted expectation is that the caption
  index finds caption-derived queries at least twice as often as blind ones, while the image
  index's paired difference has a CI containing 0.

Reading it: the image row should be flat across the two query sets (within its CI); the caption
row jumps on caption-derived queries. If the image row jumps too, something text-shaped got into
the image path — the CI gate (``leak_check``) fails on that.
"""

from __future__ import annotations

# the ablation's parts, gathered here: query synthesis, the ablation over encoded vectors, the gate
from lookalike.analysis.leak_queries import (  # noqa: F401
    INDEXES, QUERY_SETS, TEMPLATE_PHRASES, SYNONYMS, paraphrase, qualifiers_in, blind_text,
    PERIOD_SHARE, FACTS_SHOWN, page_description, build_query_sets, caption_overlap,
    read_blind_queries, matched)
from lookalike.analysis.leak_ablation import (  # noqa: F401
    AblationIndexes, build_indexes, search_all, qrels_for, ablation_table, ratios, breakdown,
    resolution, sheet, reference_labels, JUDGEMENT_COLUMNS, qrels_from_judgements,
    import_judgements, judged_at_k, Ablation, MAX_REPEATED_SHARE, degenerate_queries, INJECTIONS,
    injected_text, inject_leak, run_ablation, dual_ablation, shuffled_metadata, metadata_probe,
    PIXEL_SYSTEMS, pixel_system_runs, bm25_texts, pixel_per_query, judge_view)
from lookalike.analysis.leak_gate import (  # noqa: F401
    gate_results, gate_all, overall, gate, GateResult, paired_gate, run_probe, planted_power)
from lookalike.report.judging_sheet import judging_sheet_html  # noqa: F401
