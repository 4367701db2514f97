"""Judges: judge(question, unit) -> sufficient | supporting | irrelevant, with a short rationale.

A judge sees the question and the unit's page (its image, or text read off its pixels) — never the
unit's file name or caption. Implementations here:
  answer-string      from the unit's OCR text only: sufficient when the normalised answer appears,
                     supporting when the question's subject terms appear without it, else irrelevant
  human              labels people wrote, read from a file (never overwritten by a model)
  openai-compatible  a vision-language model behind an OpenAI-compatible chat-completions endpoint
                     (vLLM, Ollama, hosted): page image as base64, a fixed rubric, strict parsing,
                     retries with backoff, responses cached on disk, API key from an environment
                     variable and never written anywhere
Agreement between two judges: Cohen's kappa (overall, and on the sufficient/supporting boundary)
and the confusion matrix.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

LABELS = ("sufficient", "supporting", "irrelevant")


class JudgeError(RuntimeError):
    """A judge could not produce a label (bad reply after retries, unreadable label file, ...)."""


@dataclass(frozen=True)
class Judgement:
    label: str
    rationale: str
    judge: str


# ----------------------------------------------------------------------------- answer-string

_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9}
_NUMBER = re.compile(r"(?P<sign>[-−–+(])?\s*\$?\s*(?P<num>\d{1,3}(?:[,\u202f ]\d{3})+|\d+)(?P<dec>\.\d+)?\s*"
                     r"(?P<unit>%|k\b|thousand\b|mn\b|m\b|million\b|bn\b|b\b|billion\b)?\)?", re.I)
STOPWORDS = {"what", "which", "was", "were", "the", "of", "in", "for", "at", "and", "a", "an", "did", "does", "is",
             "how", "much", "more", "than", "from", "by", "to", "its", "s", "it", "share", "came", "most", "page",
             "shows", "brought", "contributed", "higher", "larger", "or"}


def normalise_numbers(text: str) -> list[float]:
    """Every number in text as a float: thousands separators dropped, $ ignored, scale words applied
    (k, m/million, bn/billion; '$1,234M' -> 1.234e9), minus signs and accounting parentheses kept."""
    out = []
    for m in _NUMBER.finditer(text):
        value = float(re.sub(r"[,\u202f ]", "", m.group("num")) + (m.group("dec") or ""))
        unit = (m.group("unit") or "").lower()
        if unit in _SCALE:
            value *= _SCALE[unit]
        if m.group("sign") in ("-", "−", "–", "("):
            value = -value
        out.append(value)
    return out


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z]+", text.lower()) if w not in STOPWORDS}


def answer_in_text(answer: str, text: str) -> bool:
    """The answer appears in the text: every number of the answer (normalised) and every word of a
    non-numeric answer."""
    nums = normalise_numbers(answer)
    have = normalise_numbers(text)
    if nums:
        return all(any(abs(n - h) <= 1e-9 * max(1.0, abs(n)) for h in have) for n in nums)
    words = _words(answer)
    return bool(words) and words <= _words(text)


class AnswerStringJudge:
    """Reads the unit's OCR text only (pass it as unit['text'])."""

    name = "answer-string"

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        text = str(unit.get("text", ""))
        answer = str(question.get("answer", ""))
        if answer and answer_in_text(answer, text):
            return Judgement("sufficient", f"the answer {answer!r} appears on the page", self.name)
        subject = _words(str(question.get("text", ""))) - _words(answer)
        found = subject & _words(text)
        if subject and len(found) >= max(1, len(subject) // 2):
            return Judgement("supporting", f"subject terms on the page ({', '.join(sorted(found)[:4])}) but not the "
                                           "answer", self.name)
        return Judgement("irrelevant", "neither the answer nor most subject terms appear", self.name)


# ----------------------------------------------------------------------------- human

class HumanJudge:
    """Labels people wrote: a CSV with query_id, unit_id, label (and optional note)."""

    name = "human"

    def __init__(self, path: Path | str):
        path = Path(path)
        if not path.is_file():
            raise JudgeError(f"{path}: label file not found")
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        for col in ("query_id", "unit_id", "label"):
            if col not in df.columns:
                raise JudgeError(f"{path}: column {col!r} is missing")
        bad = ~df["label"].isin(LABELS)
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            raise JudgeError(f"{path}: row {i + 1} label {df['label'].iloc[i]!r} is not one of {', '.join(LABELS)}")
        self.labels = {(q, u): (lab, note) for q, u, lab, note in
                       zip(df["query_id"], df["unit_id"], df["label"], df.get("note", pd.Series([""] * len(df))))}

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        key = (question["query_id"], unit["unit_id"])
        if key not in self.labels:
            raise JudgeError(f"no human label for query {key[0]!r} and unit {key[1]!r}")
        label, note = self.labels[key]
        return Judgement(label, note or "human label", self.name)


# ----------------------------------------------------------------------------- openai-compatible

RUBRIC = (
    "You judge whether a document page answers a question. Look only at the page image.\n"
    "Reply with one JSON object and nothing else: {\"label\": L, \"rationale\": R}, where L is\n"
    "\"sufficient\" if the page alone answers the question, \"supporting\" if it holds part of the\n"
    "evidence but not the whole answer, \"irrelevant\" otherwise, and R is one short sentence."
)


def parse_reply(content: str) -> tuple[str, str]:
    """Strictly parse the model's reply: a JSON object with a known label (a fenced block is allowed)."""
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.S)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JudgeError(f"reply is not a JSON object: {content[:120]!r}") from exc
    if not isinstance(obj, dict) or obj.get("label") not in LABELS:
        raise JudgeError(f"reply has no valid label (expected one of {', '.join(LABELS)}): {content[:120]!r}")
    return obj["label"], str(obj.get("rationale", ""))[:300]


class OpenAICompatibleJudge:
    """A VLM behind an OpenAI-compatible /chat/completions endpoint.

    base_url: e.g. http://localhost:8000/v1; model: the served model name; api_key_env: the name of
    the environment variable holding the key (the key itself is never stored or logged);
    cache_dir: replies cached by sha256 of (model, rubric, question, image bytes).
    """

    name = "openai-compatible"

    def __init__(self, base_url: str, model: str, api_key_env: str = "LOOKALIKE_JUDGE_API_KEY",
                 cache_dir: Path | str | None = None, timeout: float = 60.0, retries: int = 3, backoff: float = 1.0,
                 temperature: float = 0.0):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key_env = model, api_key_env
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.timeout, self.retries, self.backoff, self.temperature = timeout, retries, backoff, temperature

    def _key(self, question: str, image: bytes) -> str:
        h = hashlib.sha256()
        for part in (self.model, RUBRIC, question):
            h.update(part.encode("utf-8") + b"\0")
        h.update(image)
        return h.hexdigest()

    def _post(self, payload: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        image = Path(unit["image_path"]).read_bytes()
        qtext = str(question["text"])
        cache_path = self.cache_dir / f"{self._key(qtext, image)}.json" if self.cache_dir else None
        if cache_path and cache_path.is_file():
            cached = json.loads(cache_path.read_text())
            return Judgement(cached["label"], cached["rationale"], self.name)
        payload = {
            "model": self.model, "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": RUBRIC},
                {"role": "user", "content": [
                    {"type": "text", "text": f"Question: {qtext}"},
                    {"type": "image_url",
                     "image_url": {"url": "data:image/png;base64," + base64.b64encode(image).decode("ascii")}},
                ]},
            ],
        }
        last = None
        for attempt in range(self.retries + 1):
            try:
                reply = self._post(payload)
                label, rationale = parse_reply(reply["choices"][0]["message"]["content"])
                if cache_path:
                    cache_path.parent.mkdir(parents=True, exist_ok=True)
                    cache_path.write_text(json.dumps({"label": label, "rationale": rationale}))
                return Judgement(label, rationale, self.name)
            except (urllib.error.URLError, TimeoutError, OSError, KeyError, IndexError, JudgeError,
                    json.JSONDecodeError) as exc:
                last = exc
                if attempt < self.retries:
                    time.sleep(self.backoff * 2 ** attempt)
        raise JudgeError(f"{self.url}: no valid judgement after {self.retries + 1} attempts: {last}")


# ----------------------------------------------------------------------------- agreement

def cohen_kappa(a: Sequence[str], b: Sequence[str], labels: Sequence[str] = LABELS) -> float:
    """Cohen's kappa of two label sequences over the given label set (nan when undefined)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"kappa needs paired labels: {len(a)} vs {len(b)}")
    if not a:
        return float("nan")
    cm = confusion(a, b, labels).to_numpy(dtype=float)
    n = cm.sum()
    po = np.trace(cm) / n
    pe = float((cm.sum(axis=1) * cm.sum(axis=0)).sum() / n**2)
    return float("nan") if pe == 1.0 else float((po - pe) / (1 - pe))


def boundary_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Kappa on the sufficient/supporting boundary: over the items both judges called relevant
    (sufficient or supporting), do they agree on which?"""
    pairs = [(x, y) for x, y in zip(a, b) if x != "irrelevant" and y != "irrelevant"]
    return cohen_kappa([x for x, _ in pairs], [y for _, y in pairs], labels=("sufficient", "supporting"))


def confusion(a: Sequence[str], b: Sequence[str], labels: Sequence[str] = LABELS) -> pd.DataFrame:
    """Counts: rows the first judge's labels, columns the second's."""
    idx = {lab: i for i, lab in enumerate(labels)}
    cm = np.zeros((len(labels), len(labels)), dtype=int)
    for x, y in zip(a, b):
        cm[idx[x], idx[y]] += 1
    return pd.DataFrame(cm, index=pd.Index(labels, name="first"), columns=pd.Index(labels, name="second"))
