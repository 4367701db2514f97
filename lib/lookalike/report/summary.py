"""The stakeholder page's words and shapes, made from the run's tables: the verdict sentence at the
top, the headline table under grouped column headers, and settings that did not run as a footnote.

Every sentence here is computed from a table the run wrote; none is written for one corpus.
"""

from __future__ import annotations

import pandas as pd

from lookalike.eval.compare import format_p
from lookalike.report.tables import fmt_ci

ALPHA = 0.05


def verdict(sufficiency: pd.DataFrame, significance: pd.DataFrame, k: int = 5,
            measure: str = "sufficient@5 (hard)", alpha: float = ALPHA, noun: str = "page") -> str:
    """One sentence: the system with the highest sufficient@k under hard negatives, with its 95% CI
    and n, and whether it is ahead of the next system at Holm-adjusted p < alpha (the paired
    randomisation test over every pair of systems, stage 07's significance table). noun: what the
    corpus's units are called (page, image)."""
    hard = sufficiency[(sufficiency["negatives"] == "hard") & (sufficiency["k"] == k)] if len(sufficiency) else sufficiency
    hard = hard[pd.to_numeric(hard["n"], errors="coerce") > 0] if len(hard) else hard
    if not len(hard):
        return ("No system can be named best: no validated question was scored against hard negatives "
                "(see What was scored).")
    ranked = hard.sort_values(["sufficient", "system"], ascending=[False, True], kind="mergesort")
    best = ranked.iloc[0]
    said = (f"Best under hard negatives: {best['system']} puts a sufficient {noun} in its top {k} for a share of "
            f"{fmt_ci(best['sufficient'], best['sufficient_lo'], best['sufficient_hi'])} (95% CI) of the "
            f"{int(best['n'])} validated questions")
    if len(ranked) == 1:
        return said + " (the only system scored, so it is compared with none)."
    second = ranked.iloc[1]
    other = f"{second['system']} at {fmt_ci(second['sufficient'], second['sufficient_lo'], second['sufficient_hi'])}"
    if second["sufficient"] == best["sufficient"]:
        # every system at the top value is named: none of them is "best"
        tied = list(ranked.loc[ranked["sufficient"] == best["sufficient"], "system"])[1:]
        names = tied[0] if len(tied) == 1 else ", ".join(tied[:-1]) + f" and {tied[-1]}"
        return (f"No single best under hard negatives: {best['system']} is tied with {names} — each puts a "
                f"sufficient {noun} in its top {k} for a share of "
                f"{fmt_ci(best['sufficient'], best['sufficient_lo'], best['sufficient_hi'])} (95% CI) of the "
                f"{int(best['n'])} validated questions.")
    pair = significance[(significance["measure"] == measure)
                        & (((significance["system"] == best["system"]) & (significance["baseline"] == second["system"]))
                           | ((significance["system"] == second["system"]) & (significance["baseline"] == best["system"])))
                        ] if len(significance) else significance
    if not len(pair) or pd.isna(pair["p_holm"].iloc[0]):
        return said + f"; the next is {other}, and no paired test between the two was run."
    p = float(pair["p_holm"].iloc[0])
    if p < alpha:
        return said + f", ahead of the next, {other}, at Holm-adjusted p {_p_words(p)}."
    return (said + f"; it is not distinguishable from the next, {other}: Holm-adjusted p {_p_words(p)} "
            f"(not below {alpha:g}).")


def _p_words(p: float) -> str:
    shown = format_p(p)
    return shown if shown.startswith("<") else f"= {shown}"


# headline columns "<measure>, <negatives> (<questions>)" and "n (<questions>)" under one spanner each
HEADLINE_GROUPS = {"as generated": "random negatives · questions as generated",
                   "validated": "hard negatives · validated questions"}
HEADLINE_EXTRA = {"chance (top-1)": ("as generated", "chance"),
                  "gain slot 1→5 (paired)": ("validated", "gain, slot 1→5 (paired)")}


def spanned(headline: pd.DataFrame) -> pd.DataFrame:
    """The headline table with two header rows: a spanner per question set (random negatives on the
    questions as generated, hard negatives on the validated ones) over short measure names, so it
    fits a laptop's width. Columns that belong to no set stay under an empty spanner."""
    cols = []
    for c in headline.columns:
        group, short = "", c
        if c in HEADLINE_EXTRA:
            key, short = HEADLINE_EXTRA[c]
            cols.append((HEADLINE_GROUPS[key], short))
            continue
        for key, spanner in HEADLINE_GROUPS.items():
            if c.endswith(f"({key})"):
                group = spanner
                short = c[: -len(f"({key})")].strip().rstrip(",")
                for words in (", random negatives", ", hard"):
                    short = short.replace(words, "")
                short = short or "n"
        cols.append((group, short))
    out = headline.copy()
    out.columns = pd.MultiIndex.from_tuples(cols)
    return out


def split_not_run(settings: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(the settings that ran, without the note column; a footnote naming each setting that did not
    run with its reason, grouped by reason). settings: analysis.views.settings_wide's frame."""
    if not len(settings) or "note" not in settings.columns:
        return settings, ""
    not_run = settings[settings["note"].astype(str) != ""]
    ran = settings[settings["note"].astype(str) == ""].drop(columns=["note"])
    if not len(not_run):
        return ran, ""
    parts = []
    for reason, rows in not_run.groupby("note", sort=True):
        names = ", ".join(f"{f} {s}" for f, s in zip(rows["family"], rows["setting"]))
        parts.append(f"{names} ({str(reason).removeprefix('not run: ')})")
    return ran, f"Not run: {'; '.join(parts)}."


def lead(run: str, corpus: str, date: str, said: str) -> dict:
    """The block at the top of the page: what ran on what, when, and the verdict."""
    return {"run": run, "corpus": corpus, "date": date, "verdict": said}


def corpus_words(source: str, n_units: int, n_questions: int, noun: str = "pages", where: str = "") -> str:
    """'the built-in demo corpus: 152 pages, 96 questions' or 'images from photos/: 40 images, 12 questions'."""
    what = "the built-in demo corpus" if source == "demo" else f"{source} corpus" + (f" ({where})" if where else "")
    nouns = noun if noun.endswith("s") else f"{noun}s"
    return f"{what}: {n_units} {nouns}, {n_questions} questions"
