"""The leak ablation's two query sets, built for the same target units in the same register: blind
queries written from what a page visibly shows (never handed its caption fields) and caption-derived
paraphrases; your own blind queries read from a file; their overlap with the caption fields."""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.data.schema import CAPTION_COLUMNS
from lookalike.eval import stats
from lookalike.io import inputs
from lookalike.vocab import METRIC_LABELS, REGISTERS, money


INDEXES = ("image", "caption", "both")
QUERY_SETS = ("blind", "caption-derived")
# What a page of each template shows, in words a person would use without seeing any caption.
TEMPLATE_PHRASES = {
    "segment_bar": "{metric} by segment bar chart", "trend_line": "{metric} trend line chart",
    "region_table": "{metric} by region table", "kpi_table": "key figures table",
    "cash_flow": "condensed cash flow statement", "risk_factors": "risk factors page",
    "audit_opinion": "independent auditor review report", "signature": "signatures page",
    "org_chart": "organisation chart", "cover": "quarterly results cover slide",
}
SYNONYMS = {
    "revenue": "sales", "operating income": "operating profit", "record": "best-ever", "quarter": "period",
    "delivers": "reports", "investor update": "shareholder briefing", "at a glance": "overview",
    "highlights": "key points", "bar chart": "bar graph", "line chart": "trend graph", "table": "grid",
    "slide": "page", "capital expenditure": "capex", "headcount": "staff numbers",
}
_PERIOD_RE = re.compile(r"\bQ([1-4]) FY(\d{4})\b")


def _synonyms(text: str) -> str:
    out = text
    for word in sorted(SYNONYMS, key=len, reverse=True):
        out = re.sub(rf"\b{re.escape(word)}\b", SYNONYMS[word], out, flags=re.I)
    return out


def paraphrase(caption: str) -> str:
    """Deterministic paraphrase: synonym substitution, then comma-separated parts in reverse order
    (a comma inside a number, '$1,038M', separates nothing)."""
    text = _synonyms(" ".join(caption.split()))
    parts = [p.strip() for p in re.split(r",(?!\d)", text) if p.strip()]
    return ", ".join(reversed(parts)) if len(parts) > 1 else text


def qualifiers_in(text: str, unit: dict) -> tuple[str, ...]:
    """Which of entity / metric / period the text names for this unit."""
    low = text.lower()
    found = []
    if unit["entity"] and unit["entity"].lower() in low:
        found.append("entity")
    label = METRIC_LABELS.get(unit["metric"], "")
    if label and (label in low or SYNONYMS.get(label, "\0") in low):
        found.append("metric")
    if unit["period"] and unit["period"].lower() in low:
        found.append("period")
    return tuple(found)


def _wrap(register: str, phrase: str) -> str:
    if register == "question":
        return f"Which page shows {phrase}?"
    if register == "style":
        return f"{phrase}, laid out as a slide"
    return phrase


def blind_text(unit: dict, quals: tuple[str, ...]) -> str:
    """A description of what the page shows, stating exactly the given qualifiers."""
    metric = METRIC_LABELS.get(unit["metric"], "") if "metric" in quals else ""
    phrase = TEMPLATE_PHRASES.get(unit["template_id"], "page").format(metric=metric).strip()
    phrase = " ".join(phrase.split())
    if "entity" in quals:
        phrase += f" for {unit['entity']}"
    if "period" in quals:
        phrase += f", {unit['period']}"
    return phrase


PERIOD_SHARE = 0.5   # blind descriptions that state the period the page prints (seeded per page)
FACTS_SHOWN = (1, 2)  # printed values a blind description quotes: one or two (seeded per page)
_DECORATION = re.compile(r"\bPage \d+\b|^[A-Z][A-Z ]+$")


def _printed_value(f: Mapping) -> str:
    if f["unit"] == "%":
        return f"{f['value']:+.1f}%"
    return f"{f['value']:,.0f}" if f["unit"] == "employees" else money(f["value"])


def page_description(unit: Mapping, visible: Mapping | None, facts: Sequence[Mapping],
                     rng: np.random.Generator) -> str:
    """A blind description of one page from what it visibly shows — never from its caption fields
    (``unit`` must not carry them; ``build_query_sets`` drops them before calling).

    With a visible record (the demo's tables/visible.csv), as a person describes a page they look
    at: its colour and layout, then what it prints — one or two of its facts (a printed label with
    its value; FACTS_SHOWN) for charts and tables, else the opening words of a printed line — and, on PERIOD_SHARE
    of the pages (seeded), the period it prints. Not its title: titles are what captions paraphrase.
    Without a visible record (a corpus with metadata only): the template phrase with the metadata
    fields the corpus holds (``blind_text``)."""
    if not visible:
        return blind_text(dict(unit), ("entity", "metric", "period"))
    phrase = f"{visible['colour']} {visible['layout']}"
    if facts:
        shown = int(FACTS_SHOWN[int(rng.integers(len(FACTS_SHOWN)))])
        picks = sorted(rng.choice(len(facts), size=min(shown, len(facts)), replace=False))
        details = []
        for k in picks:
            f = facts[int(k)]
            label = f["member"] if f["member"] != "total" else METRIC_LABELS.get(f["metric"], f["metric"].replace("_", " "))
            details.append(f"{label} {_printed_value(f)}")
        phrase += " with " + " and ".join(details)
    else:
        lines = [t.strip() for t in str(visible["printed"]).split(" | ")
                 if t.strip() and t.strip() != visible["title"] and not _DECORATION.search(t.strip())
                 and not _PERIOD_RE.search(t)]
        if lines:
            words = lines[int(rng.integers(len(lines)))].split()
            phrase += ": " + " ".join(words[:6]).rstrip(",.;:")
    if unit.get("period") and rng.random() < PERIOD_SHARE and unit["period"] in str(visible["printed"]):
        phrase += f", {unit['period']}"
    return phrase


def build_query_sets(units: pd.DataFrame, seed: int, max_units: int | None = None,
                     visible: pd.DataFrame | None = None, facts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Blind and caption-derived queries, one pair per target unit.

    Target units: those whose caption text (caption, else alt text) is non-empty and their own (no
    other unit has the same text) — the same targets for both sets. The blind query describes what
    the page shows (``page_description``: visible record and facts; the caption fields are dropped
    from what it is given); the caption-derived query paraphrases the caption text only. Both go
    through the same paraphrase and the same register wrapping (a seeded draw per unit), so they
    differ in where their words come from, not in form. Returns a long frame: query_id, query_set,
    unit_id (the relevant unit), text, register, qualifiers (what the text names of entity / metric
    / period), content_type.
    """
    rng = np.random.default_rng([seed, 5])
    rows = []
    source = units["caption"].str.strip().where(units["caption"].str.strip() != "", units["alt_text"].str.strip())
    # A caption shared by several units cannot single out its unit in any index, so a query derived
    # from it is ill-posed (many units satisfy it equally); only units whose caption text is their
    # own are targets, for both query sets alike.
    counts = source.str.lower().map(source.str.lower().value_counts())
    eligible = units[(source != "") & (counts == 1)].sort_values("unit_id", kind="mergesort")
    if max_units is not None and len(eligible) > max_units:
        eligible = eligible.iloc[np.sort(rng.choice(len(eligible), size=max_units, replace=False))]
    seen = {} if visible is None or not len(visible) else visible.set_index("unit_id").to_dict("index")
    page_facts: dict[str, list] = {}
    for f in ([] if facts is None else facts.to_dict("records")):
        page_facts.setdefault(f["unit_id"], []).append(f)
    pixels_only = eligible.drop(columns=[c for c in CAPTION_COLUMNS if c in eligible.columns])
    for i, (unit, shown) in enumerate(zip(eligible.to_dict("records"), pixels_only.to_dict("records"))):
        # each unit draws from its own stream (register, then its description): a unit's pair does
        # not depend on which other units are targets
        unit_rng = np.random.default_rng([seed, 5, zlib.crc32(str(shown["unit_id"]).encode("utf-8"))])
        register = REGISTERS[int(unit_rng.integers(len(REGISTERS)))]
        cap = paraphrase(unit["caption"].strip() or unit["alt_text"].strip())
        v = seen.get(shown["unit_id"])
        blind_rng = unit_rng
        blind = paraphrase(page_description(shown, {"unit_id": shown["unit_id"], **v} if v else None,
                                            page_facts.get(shown["unit_id"], []), blind_rng))
        base = dict(unit_id=unit["unit_id"], register=register, content_type=unit.get("content_type", ""))
        rows.append(dict(query_id=f"leak{i:04d}-b", query_set="blind", text=_wrap(register, blind),
                         qualifiers=";".join(qualifiers_in(blind, shown)), **base))
        rows.append(dict(query_id=f"leak{i:04d}-c", query_set="caption-derived", text=_wrap(register, cap),
                         qualifiers=";".join(qualifiers_in(cap, shown)), **base))
    return pd.DataFrame(rows, columns=["query_id", "query_set", "unit_id", "text", "register", "qualifiers",
                                       "content_type"])


_TOKEN = re.compile(r"[a-z0-9]+")
_OVERLAP_STOP = {"which", "page", "shows", "laid", "out", "as", "a", "the", "of", "for", "at", "by", "and", "in",
                 "to", "on", "with"}


def _tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(str(text).lower()) if t not in _OVERLAP_STOP}


def caption_overlap(queries: pd.DataFrame, units: pd.DataFrame, clusters: pd.Series | None = None,
                    seed: int = 0) -> pd.DataFrame:
    """Each query set's token overlap with its unit's caption fields (caption, alt text, file name):
    the share of a query's content words found there, averaged over the set, with its bootstrap
    95% CI (clusters as the ablation's). A blind set written from the pixels should sit far below
    the caption-derived one."""
    fields = units.set_index("unit_id")[list(CAPTION_COLUMNS)].astype(str)
    caption_tokens = {u: _tokens(" ".join(re.sub(r"[_\-.]+", " ", v) for v in row))
                      for u, row in zip(fields.index, fields.to_numpy())}
    per = queries.assign(overlap=[len(q & caption_tokens.get(u, set())) / len(q) if q else 0.0
                                  for q, u in zip(map(_tokens, queries["text"]), queries["unit_id"])])
    rows = []
    for qs, part in per.groupby("query_set", sort=True):
        ci = stats.bootstrap_ci(part["overlap"].to_numpy(), rng=seed,
                                clusters=stats.cluster_array(clusters, list(part["query_id"])))
        rows.append(dict(query_set=qs, n=len(part), overlap=ci.estimate, overlap_lo=ci.lo, overlap_hi=ci.hi,
                         interval=stats.interval_words(clusters)))
    return pd.DataFrame(rows, columns=["query_set", "n", "overlap", "overlap_lo", "overlap_hi", "interval"])


def read_blind_queries(path: Path | str, units: pd.DataFrame, seed: int = 0,
                       page_base: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A user's own blind queries (CSV: query_id, unit_id, text[, register]) and their caption-derived twins.

    On a user's corpus the blind set is theirs — written from the pixels by someone who never saw
    the captions. Each row's unit gets a caption-derived twin in the same register. Qualifiers are
    read off both texts with the same rule, so ``matched`` shows whether the two sets agree in
    specificity; a unit without caption text has no twin and its blind query is dropped — listed in
    the second frame returned (source, row, unit_id, problem), never silently.
    Errors name the file and row: a missing column, an unknown unit, an unknown register, page
    numbers that contradict page_base (io.pagebase).
    """
    path = Path(path)
    asked = inputs.read_blind_query_file(path, units["unit_id"], page_base, REGISTERS)
    meta = units.set_index("unit_id")
    rows, dropped = [], []
    for rec in asked.to_dict("records"):
        i, register = rec["row"], rec["register"]
        unit = {"unit_id": rec["unit_id"], **meta.loc[rec["unit_id"]].to_dict()}
        source = str(unit.get("caption", "")).strip() or str(unit.get("alt_text", "")).strip()
        if not source:
            dropped.append({"source": path.name, "row": i + 1, "unit_id": rec["unit_id"],
                            "problem": "the unit has no caption or alt text, so there is no caption-derived twin"})
            continue
        cap = paraphrase(source)
        common = dict(unit_id=rec["unit_id"], register=register, content_type=unit.get("content_type", ""))
        rows.append(dict(query_id=f"{rec['query_id']}-b", query_set="blind", text=rec["text"],
                         qualifiers=";".join(qualifiers_in(rec["text"], unit)), **common))
        rows.append(dict(query_id=f"{rec['query_id']}-c", query_set="caption-derived", text=_wrap(register, cap),
                         qualifiers=";".join(qualifiers_in(cap, unit)), **common))
    return (pd.DataFrame(rows, columns=["query_id", "query_set", "unit_id", "text", "register", "qualifiers",
                                        "content_type"]),
            pd.DataFrame(dropped, columns=["source", "row", "unit_id", "problem"]))


def matched(queries: pd.DataFrame) -> pd.DataFrame:
    """Register and qualifier shares of each query set, side by side (they should be equal)."""
    rows = []
    for qs, part in queries.groupby("query_set", sort=True):
        row = {"query_set": qs, "n": len(part)}
        for r in REGISTERS:
            row[f"register_{r}"] = float((part["register"] == r).mean())
        for q in ("entity", "metric", "period"):
            row[f"names_{q}"] = float(part["qualifiers"].str.split(";").map(lambda x, q=q: q in x).mean())
        rows.append(row)
    return pd.DataFrame(rows)
