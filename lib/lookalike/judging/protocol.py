"""The judges' one protocol: a judgement, what a judge can do (its capabilities), the registry every
judge enters by name (``register``), and the view of a unit a judge may see (its page, or text read off
its pixels; never its file name or caption)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from lookalike.registry import Registry

from lookalike.data.schema import resolve_image




# the label of a judgement a judge could not make: it cannot see what the label needs (no answer to look
# for, no text on the unit). The pair stays unlabelled, for people or a judge that can see it.
ABSTAIN = "abstain"


class JudgeError(RuntimeError):
    """A judge could not produce a label (bad reply after retries, unreadable label file, ...)."""


@dataclass(frozen=True)
class Judgement:
    label: str
    rationale: str
    judge: str
    answer: str = ""        # the answer the unit gives, when the judge can tell (reference, answer-string, VLM)
    samples: int = 1        # how many replies the label is the majority of (openai-compatible)
    temperature: float | None = None   # the sampling temperature, for a model judge


@dataclass(frozen=True)
class Capabilities:
    """What a judge reads, returns and needs. ``source`` is what its labels are in the label store:
    people's (human), the demo's answer key (reference) or a model's (model)."""
    source: str                       # human | reference | model
    reads_image: bool = False         # looks at the page pixels
    reads_text: bool = False          # reads OCR text off the page pixels
    judges_sets: bool = False         # judges an evidence set of several pages as one item
    returns_answer: bool = False      # says which answer the unit gives (needed to repair questions)
    needs_answer_key: bool = False    # only the demo has one
    needs_answer: bool = False        # cannot call a unit sufficient for a question without an answer
    needs_labels: bool = False        # a file of people's labels
    needs_endpoint: bool = False      # a served model

    @property
    def adjudicates(self) -> bool:
        """Labels that settle a pair (people's, or the demo's answer key); a model's only pre-label."""
        return self.source in ("human", "reference")


class Judge(Protocol):
    name: str
    capabilities: Capabilities

    def judge(self, question: Mapping, unit: Mapping) -> Judgement: ...


@dataclass(frozen=True)
class JudgeSpec:
    name: str
    capabilities: Capabilities
    make: Callable[..., Judge]        # make(**resources) -> Judge
    worth: str                        # one sentence: what its labels are worth


REGISTRY: Registry[JudgeSpec] = Registry("judge")


def register(name: str, worth: str):
    """Class decorator: the class's ``capabilities`` and ``from_resources`` enter the registry under name
    (a second judge of the same name is refused)."""
    def add(cls):
        REGISTRY.register(JudgeSpec(name, cls.capabilities, cls.from_resources, worth))
        cls.name = name
        return cls
    return add


def unit_view(units: pd.DataFrame, unit_ids: Sequence[str], texts: Mapping[str, str] | None = None,
              base_dir: Path | str | None = None) -> dict:
    """What a judge may see of one unit or of an evidence set judged together: ids, image paths (in
    order, ``image_paths``; ``image_path`` too for one unit) and OCR text — never file names or
    captions. Several ids: texts are joined, ``unit_ids`` lists them."""
    return unit_viewer(units, texts, base_dir)(unit_ids)


def unit_viewer(units: pd.DataFrame, texts: Mapping[str, str] | None = None,
                base_dir: Path | str | None = None) -> Callable[[Sequence[str]], dict]:
    """unit_view for many calls: the id -> image path table is built once (a stage judges tens of
    thousands of pairs; building it per pair was most of their cost)."""
    raw = dict(zip(units["unit_id"], units["image_path"]))
    resolved: dict[str, str] = {}
    texts = texts or {}

    def path(u: str) -> str:
        if base_dir is None:
            return raw[u]
        if u not in resolved:
            resolved[u] = str(resolve_image(raw[u], base_dir))
        return resolved[u]

    def view(unit_ids: Sequence[str]) -> dict:
        ids = list(unit_ids)
        shown = {"unit_id": ";".join(ids), "unit_ids": ids, "text": "\n".join(texts.get(u, "") for u in ids),
                 "image_paths": [path(u) for u in ids]}
        if len(ids) == 1:
            shown["image_path"] = shown["image_paths"][0]
        return shown

    return view
