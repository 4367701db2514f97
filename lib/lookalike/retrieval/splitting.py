"""Query splitting: an OpenAI-compatible chat endpoint decomposes a question into sub-queries; each
is retrieved by the base system; the rankings merge round-robin without duplicates into
``<base>+split``.

The request is ``POST <url>/chat/completions`` with ``{"model", "temperature": 0, "messages":
[system prompt, question]}``; the reply's first choice must hold a JSON list of strings (a list
inside a code fence or surrounded by prose is found; numbered or bulleted lines are accepted
too). At most ``max_subqueries`` are kept; an empty or unreadable reply leaves the question
unsplit — it is retrieved as it stands and counted in ``failed`` with the reason, never guessed.
Replies are cached by (url, model, prompt version, question). With no endpoint configured the
system is not built and the stage says so.

Merging: rank 1 of every sub-query's list in sub-query order, then rank 2, ..., skipping a unit
already placed, to the run's depth. Scores in the merged run are positions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
import pandas as pd

from lookalike.retrieval.http import JsonClient, ReplyCache, ServiceError, ServiceUnavailable, endpoint_url

SUFFIX = "+split"
PROMPT_VERSION = "1"
SYSTEM_PROMPT = ("You split search questions about documents into self-contained sub-queries. Each sub-query "
                 "asks for one fact that one page could hold, repeats the names and periods it needs, and "
                 "adds nothing the question does not ask. A question that asks for one fact stays one "
                 "sub-query. Reply with a JSON list of strings and nothing else.")


class SplitError(ServiceError):
    """The chat endpoint refused a request or replied with what cannot be read."""


class SplitUnavailable(SplitError, ServiceUnavailable):
    """The chat endpoint gave no reply after every retry."""


def parse_subqueries(text: str, limit: int) -> list[str]:
    """Sub-queries from a chat reply: a JSON list of strings (anywhere in the reply), else numbered /
    bulleted lines. Blank and repeated entries are dropped; at most limit kept. Raises SplitError
    when nothing can be read."""
    text = str(text or "")
    found: list[str] | None = None
    for match in re.finditer(r"\[.*?\]", text, flags=re.S):
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            found = value
            break
    if found is None:
        lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", line).strip() for line in text.splitlines()]
        marked = [line for raw, line in zip(text.splitlines(), lines) if re.match(r"^\s*(?:[-*•]|\d+[.)])\s+", raw)]
        found = marked
    out, seen = [], set()
    for item in found:
        item = " ".join(item.split())
        if item and item.lower() not in seen:
            seen.add(item.lower())
            out.append(item)
    if not out:
        raise SplitError(f"no sub-queries in the reply: {text[:120]!r}")
    return out[:limit]


class ChatSplitter:
    """Decomposes questions through an OpenAI-compatible /v1/chat/completions endpoint."""

    def __init__(self, url: str, model: str, api_key_env: str = "LOOKALIKE_SPLIT_API_KEY", max_subqueries: int = 4,
                 timeout_s: float = 60.0, retries: int = 4, backoff_s: float = 1.0, cache_dir: Path | None = None):
        if not url or not model:
            raise SplitError("query splitting needs split.url (e.g. http://host:8000/v1) and split.model")
        self.url = endpoint_url(url, "/chat/completions")
        self.model, self.max_subqueries = model, int(max_subqueries)
        self.client = JsonClient(self.url, api_key_env, timeout_s, retries, backoff_s, SplitError, SplitUnavailable)
        self.id = f"split:{self.url}|{model}|prompt-{PROMPT_VERSION}|max-{self.max_subqueries}"
        self.cache = ReplyCache(Path(cache_dir) / "split" if cache_dir else None)

    def reply(self, question: str) -> str:
        """The chat endpoint's reply for a question (cached)."""
        key = ReplyCache.key(self.id, question)
        held = self.cache.get(key, lambda v: isinstance(v, dict) and isinstance(v.get("reply"), str))
        if held is not None:
            return held["reply"]
        answer = self.client.request({"model": self.model, "temperature": 0, "messages": [
            {"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]})
        try:
            text = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise SplitError(f"{self.url}: the reply has no choices[0].message.content: {str(answer)[:120]!r}") from None
        if not isinstance(text, str):
            raise SplitError(f"{self.url}: the reply's content is not text")
        self.cache.put(key, {"question": question, "reply": text})
        return text

    def split(self, question: str) -> list[str]:
        """The question's sub-queries as the endpoint splits it (at most max_subqueries)."""
        return parse_subqueries(self.reply(question), self.max_subqueries)


@dataclass
class Splits:
    """Every question's sub-queries, and the questions retrieved unsplit with the reason."""
    table: pd.DataFrame                              # query_id, sub_id, position, text
    failed: list = field(default_factory=list)       # (query_id, reason): retrieved unsplit


def split_questions(splitter: ChatSplitter, questions: pd.DataFrame) -> Splits:
    """Every question's sub-queries (``query_id~1``, ``~2``, ...). A question the endpoint cannot
    split stands as its own single sub-query and is listed in failed; a server that is down stops."""
    rows, failed = [], []
    for qid, text in zip(questions["query_id"], questions["text"]):
        try:
            subs = splitter.split(str(text))
        except SplitUnavailable:
            raise
        except SplitError as exc:
            failed.append((str(qid), str(exc)))
            subs = [str(text)]
        rows.extend((qid, f"{qid}~{i + 1}", i + 1, s) for i, s in enumerate(subs))
    return Splits(pd.DataFrame(rows, columns=["query_id", "sub_id", "position", "text"]), failed)


def merge_round_robin(sub_runs: pd.DataFrame, splits: pd.DataFrame, depth: int) -> pd.DataFrame:
    """One ranking per question from its sub-queries' rankings (sub_runs: query_id = sub_id):
    round-robin over the sub-queries in order, a unit placed once, to depth; scores are positions."""
    from lookalike.eval import ranking

    ranked = ranking.rank(sub_runs) if len(sub_runs) else sub_runs.assign(rank=[])
    lists = {sid: list(g.sort_values("rank", kind="mergesort")["unit_id"]) for sid, g in ranked.groupby("query_id")}
    rows = []
    for qid, group in splits.groupby("query_id", sort=True):
        subs = [lists.get(s, []) for s in group.sort_values("position")["sub_id"]]
        merged: list[str] = []
        seen: set[str] = set()
        for r in range(max((len(x) for x in subs), default=0)):
            for lst in subs:
                if r < len(lst) and lst[r] not in seen:
                    seen.add(lst[r])
                    merged.append(lst[r])
            if len(merged) >= depth:
                break
        merged = merged[:depth]
        rows.extend((qid, u, float(len(merged) - i)) for i, u in enumerate(merged))
    return pd.DataFrame(rows, columns=["query_id", "unit_id", "score"])


def sub_questions(splits: pd.DataFrame) -> pd.DataFrame:
    """The sub-queries as questions a system can rank (query_id = sub_id)."""
    return pd.DataFrame({"query_id": list(splits["sub_id"]), "text": list(splits["text"])})
