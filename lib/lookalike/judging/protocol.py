"""The judges' one protocol: a judgement, what a judge can do (its capabilities), the registry every
judge enters by name (``register``), and the view of a unit a judge may see (its page, or text read off
its pixels; never its file name or caption)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from lookalike import registry
from lookalike.registry import Registry

from lookalike.data.schema import resolve_image




# the label of a judgement a judge could not make: it cannot see what the label needs (no answer to look
# for, no text on the unit). The pair stays unlabelled, for people or a judge that can see it.
ABSTAIN = "abstain"


class JudgeError(RuntimeError):
    """A judge could not produce a label (bad reply after retries, unreadable label file, ...)."""


@dataclass(frozen=True)
class Judgement:
    """One judge's label for one (question, unit) pair: sufficient, supporting or irrelevant (or
    ABSTAIN), why, and which judge said it."""

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
    """What a judge is: a name, what it reads and needs (capabilities), and a label per pair."""

    name: str
    capabilities: Capabilities

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        """The label of one unit (its text, image path, metadata) for one question (text, answer)."""
        ...


@dataclass(frozen=True)
class JudgeSpec:
    """A registered judge: its name, capabilities, how to make it from the run's resources, and one
    sentence on what its labels are worth."""

    name: str
    capabilities: Capabilities
    make: Callable[..., Judge]        # make(**resources) -> Judge
    worth: str                        # one sentence: what its labels are worth

    @property
    def tags(self) -> tuple[str, ...]:
        """What the parameter schema may ask of a judge by tag: its labels' source (model, human, reference)."""
        return (self.capabilities.source,)


REGISTRY: Registry[JudgeSpec] = Registry("judge")


def register(name: str, worth: str):
    """Class decorator: the class's ``capabilities`` and ``from_resources`` enter the registry under name
    (a second judge of the same name is refused)."""
    def add(cls):
        held = REGISTRY.get(name)
        if held is not None and _same_class(held.make, cls):
            # the same module imported again (a plug-in file read anew): its class takes the name back
            REGISTRY.replace(JudgeSpec(name, cls.capabilities, cls.from_resources, worth))
        else:
            if held is None:                     # a taken name is refused as such, whatever the class
                check_judge_class(cls, name)
            REGISTRY.register(JudgeSpec(name, cls.capabilities, cls.from_resources, worth))
        cls.name = name
        return cls
    return add


def _same_class(make, cls) -> bool:
    """Whether a registered judge's maker is cls's, or the same class of the same module imported again."""
    owner = getattr(make, "__self__", None)
    return owner is cls or (owner is not None and (owner.__module__, owner.__qualname__) == (cls.__module__, cls.__qualname__))


def check_judge_class(cls, where: str) -> None:
    """What lookalike needs of a judge class, each failure named: ``capabilities`` (a Capabilities),
    a ``from_resources(**resources)`` class method that makes the judge, and ``judge(question, unit)``."""
    if not isinstance(getattr(cls, "capabilities", None), Capabilities):
        raise JudgeError(f"judge {where}: set a class attribute capabilities = Capabilities(source=...) "
                         f"(what it reads and needs), got {getattr(cls, 'capabilities', None)!r}")
    for method in ("from_resources", "judge"):
        if not callable(getattr(cls, method, None)):
            raise JudgeError(f"judge {where}: no {method} method (lookalike.plugin: Judge)")


class PluginRefused(JudgeError, registry.PluginError):
    """A judge plug-in that does not load or is not a judge (registry.load_plugin's refusals)."""


def plugin_judge(spec: str, bases: Sequence[Path] = ()) -> str:
    """A judge class named by import path ("package.module:Class" or "path/to/file.py:Class") entered in
    the registry under its ``name`` attribute (its ``worth``, or its docstring's first line, says what its
    labels are worth); returns that name. The same class named twice is entered once; another judge
    already under that name is refused."""
    def check(cls) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise JudgeError(f"judge {spec!r}: set a class attribute name (letters, digits, '.', '_', '-'): it "
                             f"names the judge on every label it writes; got {name!r}")
        check_judge_class(cls, repr(spec))

    cls = registry.load_plugin(spec, "judge", bases, check, PluginRefused)
    name = cls.name
    if name in REGISTRY:
        if not _same_class(REGISTRY[name].make, cls):
            raise JudgeError(f"judge {spec!r}: name {name!r} is already another judge's; choose another")
        return name
    worth = getattr(cls, "worth", "") or (cls.__doc__ or "").strip().split("\n")[0] or "a plug-in judge"
    REGISTRY.register(JudgeSpec(name, cls.capabilities, cls.from_resources, worth))
    return name


REGISTRY.plugin = plugin_judge


# content types whose evidence is drawn, not written: a judge that reads text cannot see what they show
VISUAL_CONTENT = ("chart", "graphic", "photo")


def drawn_not_written(unit: Mapping) -> str:
    """Why a judge that reads text cannot see what a unit shows ('' when it can): every unit of the view is
    a chart, a graphic or a photo by its content type (the corpus's metadata)."""
    kinds = [str(k) for k in unit.get("content_types", ()) if str(k)]
    if kinds and len(kinds) == len(unit.get("unit_ids", kinds)) and all(k in VISUAL_CONTENT for k in kinds):
        return (f"the evidence is a {' and a '.join(sorted(set(kinds)))} (content type): its text cannot show "
                "what it draws")
    return ""


def unit_view(units: pd.DataFrame, unit_ids: Sequence[str], texts: Mapping[str, str] | None = None,
              base_dir: Path | str | None = None) -> dict:
    """What a judge may see of one unit or of an evidence set judged together: ids, image paths (in
    order, ``image_paths``; ``image_path`` too for one unit), OCR text and each unit's content type
    (``content_types``: chart, table, text, ...) — never file names or captions. Several ids: texts are
    joined, ``unit_ids`` lists them."""
    return unit_viewer(units, texts, base_dir)(unit_ids)


def unit_viewer(units: pd.DataFrame, texts: Mapping[str, str] | None = None,
                base_dir: Path | str | None = None) -> Callable[[Sequence[str]], dict]:
    """unit_view for many calls: the id -> image path table is built once (a stage judges tens of
    thousands of pairs; building it per pair was most of their cost)."""
    raw = dict(zip(units["unit_id"], units["image_path"]))
    kinds = dict(zip(units["unit_id"], units["content_type"].astype(str))) if "content_type" in units.columns else {}
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
                 "image_paths": [path(u) for u in ids], "content_types": [kinds.get(u, "") for u in ids]}
        if len(ids) == 1:
            shown["image_path"] = shown["image_paths"][0]
        return shown

    return view
