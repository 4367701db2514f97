"""The human judge: labels people wrote, read from a file (never overwritten by a model)."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping, Sequence

from lookalike.io.labels import read_label_file
from lookalike.judging.protocol import Capabilities, JudgeError, Judgement, register


@register("human", "labels people wrote, read from a file: the labels every other judge is measured against")
class HumanJudge:
    """Labels people wrote: a CSV with query_id, unit_id, label (and optional note)."""

    capabilities = Capabilities("human", reads_image=True, needs_labels=True)

    @classmethod
    def from_resources(cls, labels="", units=None, page_base=1, **_):
        """The human judge for a run: the label file named by validate.labels, read against the corpus's unit ids."""
        if not labels:
            raise JudgeError("the human judge needs validate.labels: a CSV of query_id, unit_id, label")
        return cls(labels, None if units is None else units["unit_id"], page_base)

    def __init__(self, path: Path | str, unit_ids: Sequence[str] | None = None, page_base: int = 1,
                 query_ids: Sequence[str] | None = None):
        """The file read by io.labels.read_label_file: unit_ids (the corpus's) check its page numbers
        against page_base and set aside rows naming no unit; query_ids (the run's questions) likewise;
        a pair given two different labels is set aside in ``skipped`` and left unlabelled."""
        self.labels, self.skipped = read_label_file(path, unit_ids, query_ids, page_base, JudgeError)

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        """The person's label for this pair; a pair nobody labelled is a JudgeError naming it."""
        key = (question["query_id"], unit["unit_id"])
        if key not in self.labels:
            raise JudgeError(f"no human label for query {key[0]!r} and unit {key[1]!r}")
        label, note = self.labels[key]
        return Judgement(label, note or "human label", self.name)
