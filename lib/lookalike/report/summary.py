"""The stakeholder page's words and shapes, made from the run's tables: the verdict sentence at the
top, the headline table under grouped column headers, settings that did not run as a footnote, and
the sentences under each block (what was scored, the ladder, hard against random, the planner, the
haystack, the labels and the agreement they rest on), and the page's blocks in their order
(``blocks``): stage 07 hands over its tables and claims (``SummaryInputs``) and writes what comes back.

Every sentence here is computed from a table the run wrote; none is written for one corpus.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pandas as pd

from lookalike.eval import stats
from lookalike.report.tables import as_number, ci_pivot
from lookalike.vocab import unit_noun  # noqa: F401 (the stages and the audit read it here)



# headline columns "<measure>, <negatives> (<questions>)" and "n (<questions>)" under one spanner each
HEADLINE_GROUPS = {"as generated": "random negatives · questions as generated",
                   "validated": "hard negatives · validated questions"}
HEADLINE_EXTRA = {"chance (top-1)": ("as generated", "chance"),
                  "chance @1 · @5 (hard)": ("validated", "chance @1·@5"),
                  "gain slot 1→5 (paired)": ("validated", "gain 1→5, paired")}


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


def kappa_words(row: Mapping) -> str:
    """'kappa 0.15 [0.11, 0.19]' from an agreement row (values may come back from a CSV as text);
    'kappa undefined' when it is (a judge that gave a single label throughout, or no pairs)."""
    k, lo, hi = (as_number(row.get(key)) for key in ("kappa", "kappa_lo", "kappa_hi"))
    if k != k:
        agree, n = as_number(row.get("agreement")), as_number(row.get("n"))
        raw = (f"; raw agreement {agree:.2f} over {int(n)} pairs" if agree == agree and n == n and n > 0 else "")
        return ("kappa undefined (a judge gave one label throughout, or there were no pairs)" + raw)
    return f"kappa {k:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo == lo and hi == hi else "")


def kappa_over(row: Mapping) -> str:
    """kappa_words with the number of pairs it is over, said once ('... over 470 pairs')."""
    said, n = kappa_words(row), as_number(row.get("n"))
    return said if "over" in said or n != n else f"{said} over {int(n)} pairs"


def ladder_words(ladder_t: pd.DataFrame, slopes: dict) -> str:
    """The validity ladder in words: flat against random pages and following p against look-alikes, or
    why it was not measured. slopes: top-1 on p per set of negatives (analysis.negatives.ladder_slopes)."""
    fitted = all(v == v for v in (slopes.get("random", float("nan")), slopes.get("hard", float("nan"))))
    flat = fitted and abs(slopes["random"]) <= 0.1
    # read back from a CSV, an unmeasured rung is '': left out of the level, as the slope leaves it out
    level = pd.to_numeric(ladder_t[ladder_t["negatives"] == "random"]["top1"], errors="coerce").dropna()
    said = ("Five synthetic systems differ only in how often they put the right look-alike first (p). "
            + (f"Against random pages every one of them scores "
               f"{f'{level.min():.2f}' if level.min() == level.max() else f'{level.min():.2f}–{level.max():.2f}'}"
               " — top-1 slope "
               f"{slopes['random']:+.2f} across p — so a benchmark built on random negatives cannot tell them "
               "apart" if flat else
               f"Against this corpus's random pages top-1 still moves with p (slope {slopes.get('random', float('nan')):+.2f}): "
               "its random negatives often share the gold's template")
            + f"; against the gold's look-alikes top-1 follows p (slope {slopes.get('hard', float('nan')):+.2f}). "
              "Same questions, same systems; only the negatives differ.")
    if not fitted:
        said = ("The validity ladder was not measured on this corpus: fewer than two of its rungs had questions "
                "with both random and look-alike negatives (tables/validity_ladder.csv).")
    return said


def planner_words(plan: pd.DataFrame, clusters) -> str:
    """(clusters: the run's question clusters, or the interval's words as the tables record them)"""
    return _planner_words(plan, clusters if isinstance(clusters, str) else stats.interval_words(clusters))


def _planner_words(plan: pd.DataFrame, interval: str) -> str:
    """The planner in words, for sufficient@5 under hard negatives: the difference this n resolves (median
    over pairs with any variance) and the largest unresolved difference with the questions it would need;
    empty when nothing was compared."""
    hard_plan = plan[plan["measure"] == "sufficient@5 (hard)"] if len(plan) else plan
    if not len(hard_plan):
        return ""
    # unresolved as the planner reads it: a difference smaller than what this n resolves (its CI holds 0)
    open_pairs = hard_plan[(hard_plan["difference"].abs() < hard_plan["resolvable"])
                           & (hard_plan["difference"].abs() > 0)]
    resolvable = pd.to_numeric(hard_plan["resolvable"], errors="coerce")
    if not (resolvable > 0).any():
        text = (f"Not measured: with {int(hard_plan['n'].iloc[0])} validated questions, sufficient@5 under hard "
                "negatives is the same for every system on every question (zero variance in every pair), so no "
                "difference in it between systems can be resolved or planned for from this set.")
    else:
        text = (f"With {int(hard_plan['n'].iloc[0])} validated questions, sufficient@5 under hard negatives resolves "
                f"differences of about {resolvable[resolvable > 0].median():.2f} between two systems (median over "
                f"the {int((resolvable > 0).sum())} pair{'' if int((resolvable > 0).sum()) == 1 else 's'} with any "
                f"variance; {interval}, "
                "one comparison before Holm's adjustment).")
    if len(open_pairs):
        top = open_pairs.loc[open_pairs["difference"].abs().idxmax()]
        text += (f" The largest difference this n does not resolve, {top['system']} − {top['minus']} "
                 f"{top['difference']:+.2f}, would need about {top['n_needed']:.0f} questions at 80% power.")
    return text


_PAGE_WORD = re.compile(r"\bpage(s?)\b(?!-)")


def nouned(text: str, noun: str) -> str:
    """text with the unit called by its noun: 'page' / 'pages' as words (not 'page-single', an
    evidence structure's name) become noun / nouns."""
    return text if noun == "page" else _PAGE_WORD.sub(lambda m: noun + m.group(1), text)


_TAG_OR_TEXT = re.compile(r"(<[^>]*>)|([^<]+)")


def nouned_html(markup: str, noun: str) -> str:
    """nouned() on an HTML fragment's text: tags, attributes and column headers (<th>: a table's field
    names, such as a unit's page number) are left as they are."""
    if noun == "page":
        return markup
    out, in_header = [], 0
    for m in _TAG_OR_TEXT.finditer(markup):
        tag, text = m.group(1), m.group(2)
        if tag is not None:
            name = tag[1:].lstrip("/").split(None, 1)[0].rstrip(">").lower() if len(tag) > 2 else ""
            if name == "th":
                in_header += -1 if tag.startswith("</") else 1
            out.append(tag)
        else:
            out.append(text if in_header > 0 else nouned(text, noun))
    return "".join(out)


def harder_words(table: pd.DataFrame, top1: pd.DataFrame | None = None) -> str:
    """Per system, whether the hard set is measurably harder than random negatives (stage 04's paired
    top-1 difference, random − hard, questions as generated), and which distractor method made it. top1:
    stage 07's top-1 under random negatives with chance (top1_random_original); a system whose interval
    there holds chance is said to be at chance, and nothing is asked of its hard set (a system that finds
    nothing against random pages cannot find less against look-alikes)."""
    said = []
    at_chance = {}
    if top1 is not None and len(top1) and {"system", "top1", "top1_lo", "top1_hi", "chance"} <= set(top1.columns):
        for r in top1.itertuples():
            lo, chance = as_number(r.top1_lo), as_number(r.chance)
            if lo == lo and chance == chance and lo <= chance:
                at_chance[str(r.system)] = (f"at chance under random negatives (top-1 {as_number(r.top1):.2f} "
                                            f"[{lo:.2f}, {as_number(r.top1_hi):.2f}], chance {chance:.2f}): whether "
                                            "the hard set is harder is not asked of it")
    for r in table.itertuples():
        if str(r.system) in at_chance:
            said.append(f"{r.system}: {at_chance[str(r.system)]}")
            continue
        n = int(as_number(r.n) or 0) if as_number(r.n) == as_number(r.n) else 0
        if not n:
            said.append(f"{r.system}: not measured (no question has both kinds of negatives)")
            continue
        d, lo, hi = (as_number(x) for x in (r.difference, r.difference_lo, r.difference_hi))
        verdict = "measurably harder" if str(r.harder) == "True" else "not measurably harder"
        said.append(f"{r.system}: {verdict} (top-1 random − hard {d:+.2f} [{lo:+.2f}, {hi:+.2f}], n = {n})")
    method = str(table["method"].iloc[0]) if "method" in table.columns and len(table) else ""
    return (f"Distractor method: {method}. " if method else "") + "Pixel-only systems (stage 04 scores those): " + "; ".join(said) + (
        ". A system for which the hard set is not measurably harder gains nothing from the hard-negative "
        "figures over random ones.")


def flagged_words(validation: pd.DataFrame, agreement: pd.DataFrame) -> str:
    """The 'flagged by <judge>' slice in words: questions people judged that a machine judge says a
    look-alike also answers. They stay in every figure; the judge's measured agreement with people is
    said beside them (or that it was not measured)."""
    if "flagged_by" not in validation.columns:
        return ""
    flagged = validation[validation["flagged_by"].astype(str) != ""]
    if not len(flagged):
        return ""
    parts = []
    for judge, part in flagged.groupby("flagged_by", sort=True):
        row = agreement[(agreement.get("model", pd.Series(dtype=str)) == judge)
                        & (agreement.get("adjudicator", pd.Series(dtype=str)) == "human")] if len(agreement) else agreement
        measured = (f"{judge}'s agreement with people: {kappa_over(row.iloc[0])}"
                    if len(row) else f"{judge}'s agreement with people is not measured yet")
        parts.append(f"{len(part)} of {len(validation)} questions flagged by {judge} (it says a look-alike also answers "
                     f"them: {', '.join(part['query_id'].head(5))}{' …' if len(part) > 5 else ''}); {measured}")
    return ("; ".join(parts) + ". They stay in every figure as people judged them; the pairs are in the labelling "
            "pool for people to settle (tables/question_validation.csv, column note).")


# how each distractor method is said (analysis.negatives.METHODS' keys)
METHOD_WORDS = {"per-axis": "pages of its own template that differ from it on one axis",
                "template": "every other page of its template (the metadata names no axis to vary within it)",
                "cluster": "its nearest pages by appearance within its appearance cluster (no template names its "
                           "look-alikes)",
                "none": "nothing (no template and no appearance neighbour)"}


def hard_words(hard_sets: pd.DataFrame) -> str:
    """What the hard competitors are, in words true of this run: each distractor method with the number
    of questions in the hard columns it made the candidates of (tables/hard_sets.csv)."""
    inside = hard_sets[hard_sets["in_hard"].astype(str).str.lower() == "true"] if len(hard_sets) else hard_sets
    if not len(inside):
        return "the gold's look-alikes (no question has a hard set larger than 5 candidates, so none is scored here)"
    counts = inside["method"].value_counts()
    order = [m for m in METHOD_WORDS if m in counts.index]
    if len(order) == 1:
        return f"the gold's look-alikes: {METHOD_WORDS[order[0]]}"
    return "the gold's look-alikes: " + "; ".join(f"for {int(counts[m])} questions {METHOD_WORDS[m]}" for m in order)


def ceiling_note(headline: pd.DataFrame) -> str:
    """Columns at the ceiling or floor for every system, said beside the table: such a figure cannot
    separate the systems (lookalike audit's discriminating invariant reads '<column>: cannot separate')."""
    said = []
    for col in headline.columns:
        cells = headline[col].astype(str)
        if len(headline) < 2 or not cells.str.match(r"^-?\d").all():
            continue
        for edge, where in (("1.00 [1.00, 1.00]", "the ceiling"), ("0.00 [0.00, 0.00]", "the floor")):
            if (cells == edge).all():
                said.append(f"{col}: cannot separate the systems — every one is at {where} ({edge})")
    return "; ".join(said) + ("." if said else "")


def labels_provenance(current: pd.DataFrame, agreement: pd.DataFrame | None = None) -> tuple[str, bool]:
    """(sentence, unverified) for the current labels a figure rests on: how many are people's, the
    demo's answer key's and a model's only (naming the judges), and, for model-only labels, whether
    their agreement with people was measured (``agreement``: stage 06's label_agreement table, with
    its adjudicator column). unverified: some labels are model-only and nobody measured that model
    against people's labels — the sentence then says so in those words."""
    if current is None or not len(current):
        return "no labels", False
    parts = []
    # judgements that came with the corpus (judge qrels:<file>) are people's, but nobody here made them
    supplied = (current["source"] == "human") & current["judge"].astype(str).str.startswith("qrels:")
    for mine, words, named in ((current[supplied], "that came with the corpus", True),
                               (current[(current["source"] == "human") & ~supplied], "by people", True),
                               (current[current["source"] == "reference"], "from the demo's answer key", False),
                               (current[current["source"] == "model"], "model-only", True)):
        if len(mine):
            judges = ", ".join(sorted(set(mine["judge"])))
            parts.append(f"{len(mine)} {words}" + (f" ({judges})" if named else ""))
    sentence = f"labels: {'; '.join(parts)} of {len(current)} pairs"
    model_only = current[current["source"] == "model"]
    measured = (agreement is not None and len(agreement) and "adjudicator" in agreement.columns
                and (agreement["adjudicator"] == "human").any())
    if len(model_only) and not measured:
        judges = ", ".join(sorted(set(model_only["judge"])))
        return f"{sentence}. Unverified labels: {judges}, agreement with people not measured", True
    return sentence, False


def labels_made_words(agreement: pd.DataFrame, current: pd.DataFrame) -> str:
    """How the labels were made: the pre-label judge, the adjudicator, their agreement, and which labels the
    tables use ('' without an agreement table)."""
    if agreement is None or not len(agreement):
        return ""
    a = agreement.iloc[0]
    people = current[current["source"] == "human"] if current is not None and len(current) else current
    supplied = (people is not None and len(people) and a["adjudicator"] == "human"
                and people["judge"].astype(str).str.startswith("qrels:").all())
    return (f"Pre-labels by {a['model']}, "
            + ("compared with the judgements that came with the corpus (no person adjudicated here)" if supplied
               else f"adjudicated by {a['adjudicator']}")
            + (" (the demo generator's answer key)" if a["adjudicator"] == "reference" else "")
            + f"; agreement on {int(float(a['n'] or 0))} pairs: {kappa_words(a)}. "
            + current_labels_words(current))


def people_words(agreement: pd.DataFrame | None, door: pd.DataFrame | None) -> str:
    """What the people who labelled did, for the summary: their agreement (overall, per pool where the
    judge door split them, and the model against them) as kappa with its interval or why it is
    undefined, and the judge door's people row — the share of pairs each pool called relevant and the
    difference, with intervals. '' when no person labelled on the team server."""
    said = []
    rows = agreement.to_dict("records") if agreement is not None and len(agreement) else []
    for r in rows:
        scope = str(r.get("scope", ""))
        if not (scope.startswith("people, overall") or scope.startswith("model vs people")):
            continue
        agree = as_number(r.get("agreement"))
        said.append(f"{scope}: {kappa_over(r)}" + (f", raw agreement {agree:.2f}" if agree == agree
                                                    and "raw agreement" not in kappa_over(r) else ""))
    people = door[door["judge"].astype(str).str.startswith("people")] if door is not None and len(door) else None
    for r in (people.to_dict("records") if people is not None else []):
        fig = lambda c: (f"{as_number(r.get(c)):.2f} [{as_number(r.get(c + '_lo')):.2f}, "   # noqa: E731
                         f"{as_number(r.get(c + '_hi')):.2f}]")
        diff = as_number(r.get("difference"))
        said.append(f"the judge door with people: relevant {fig('share_blind')} of pairs blind, "
                    f"{fig('share_with_metadata')} with file name and caption"
                    + (f", difference {diff:+.2f} [{as_number(r.get('difference_lo')):+.2f}, "
                       f"{as_number(r.get('difference_hi')):+.2f}]" if diff == diff else "")
                    + f" over {int(as_number(r.get('n_pairs')))} pairs ({int(as_number(r.get('gained')))} gained, "
                      f"{int(as_number(r.get('lost')))} lost)")
    if not said:
        return ""
    text = "; ".join(said)
    return text[0].upper() + text[1:] + " (95% intervals)."


def current_labels_words(current: pd.DataFrame) -> str:
    """Which labels the tables use, counted by who made them (never 'adjudicated' for model-only ones)."""
    if current is None or not len(current) or "source" not in current.columns:
        return "The tables use no labels."
    model = int((current["source"] == "model").sum())
    if not model:
        return "The tables use the adjudicated labels."
    return (f"The tables use the current labels: {len(current) - model} adjudicated and {model} model-only "
            f"(of {len(current)} pairs).")


def haystack_sentence(curve: pd.DataFrame, corpus_size: int, rests_on: str = "", interval: str = "") -> str:
    """What the haystack curve says, for the summary page: the system best at full size, its
    recall@10 from the smallest subsample to the whole corpus and, when there is one, its
    extrapolation, called one."""
    full = curve[(curve["measure"] == "recall_10") & (curve["corpus_size"] == corpus_size) & ~curve["extrapolated"]]
    if full.empty:
        return ""
    best = full.sort_values(["value", "system"], ascending=[False, True], kind="mergesort").iloc[0]["system"]
    mine = curve[(curve["system"] == best) & (curve["measure"] == "recall_10")].sort_values("corpus_size")
    seen, guess = mine[~mine["extrapolated"]], mine[mine["extrapolated"]]
    first, last = seen.iloc[0], seen.iloc[-1]
    said = (f"Every question was ranked again against nested random subsamples of the corpus, its gold and hard "
            f"distractors always kept. Recall@10 of {best} (the best at full size) is {first['value']:.2f} "
            f"[{first['lo']:.2f}, {first['hi']:.2f}] at {int(first['corpus_size'])} units and {last['value']:.2f} "
            f"[{last['lo']:.2f}, {last['hi']:.2f}] at {int(last['corpus_size'])} (n = {int(last['n'])} validated "
            f"questions{', scored against ' + rests_on if rests_on else ''}{'; ' + interval if interval else ''}).")
    if len(guess):
        g = guess.iloc[0]
        said += (f" A line in log corpus size puts it at {g['value']:.2f} [{g['lo']:.2f}, {g['hi']:.2f}] at "
                 f"{int(g['corpus_size']):,} units (report.target_corpus_size): an extrapolation, not a measurement "
                 f"— measure at that size before believing it.")
    return said


def sentence(text: str) -> str:
    """A clause as a sentence: capital first letter, full stop."""
    return f"{text[:1].upper()}{text[1:]}." if text else ""


# ----------------------------------------------------------------------------- the page's blocks

@dataclass(frozen=True)
class Block:
    """One block of the summary page: a heading, its sentence (plain text; escaped where written), an
    optional table (escaped; two-level columns become grouped headers), a figure (a name under
    figures/, inlined as SVG), a note and a footnote (muted lines: what did not run and why)."""

    heading: str
    text: str = ""
    table: pd.DataFrame | None = None
    figure: str = ""
    note: str = ""
    footnote: str = ""

    def words(self) -> str:
        """The block's sentences (text and note), as claims.json must hold them."""
        return f"{self.text}\n{self.note}"


@dataclass(frozen=True)
class SummaryInputs:
    """What the summary page is made from: stage 07's tables and claim records, and the words the
    analysis layer computes for it (the report layer sits below analysis, so they come in as words)."""

    claims: Mapping[str, dict]                 # claim id -> claim record (report.claims); 'scored' always
    headline: pd.DataFrame                     # stage 07's headline table
    evidence: pd.DataFrame                     # evidence-complete figures, long (aggregate, k, measure, ...)
    macro_words: str                           # what the Macro figure averages (analysis.scoring.macro_weights)
    settings_view: pd.DataFrame                # the benchmark's settings per family
    trace_counts: pd.DataFrame                 # questions fusion lost, by component and method
    effects: pd.DataFrame                      # planted effects and what was recovered (the demo's)
    haystack: pd.DataFrame                     # the haystack curve
    source_cells: int                          # cells of the source x evidence-structure heatmap
    scored: int                                # validated single-gold questions scored
    interval: str                              # how intervals resample (eval.stats.interval_words)
    hard_vs_random: bool                       # stage 04 measured hard against random negatives
    ladder: pd.DataFrame                       # stage 04's validity ladder ([] when not measured)
    ladder_slopes: Mapping[str, float] = field(default_factory=dict)   # analysis.negatives.ladder_slopes
    source_column: str = "content_type"
    noun: str = "page"


# the blocks a summary keeps when nothing was scored: what was scored, and what the labels are
UNSCORED = ("What was scored", "How the labels were made", "The people who labelled", "What the labels rest on",
            "People-judged questions a machine judge flagged")


def evidence_macro(evidence: pd.DataFrame) -> pd.DataFrame:
    """The Macro evidence-complete figures at k = 10, one row per system, with the number of evidence
    structures they average and of questions under them (the table's own n counts structures for a Macro
    row: shown as a bare "n" beside the questions' n everywhere else, 1 read as one question)."""
    ten = evidence[evidence["k"] == 10] if len(evidence) else evidence
    if not len(ten):
        return pd.DataFrame()
    wide = ci_pivot(ten[ten["aggregate"] == "macro"], ["system", "n"]).rename(columns={"n": "structures"})
    questions = ten[ten["aggregate"] == "micro"].groupby("system")["n"].max()
    wide.insert(1, "questions", wide["system"].map(questions).astype("Int64"))
    return wide


def blocks(s: SummaryInputs) -> list[Block]:
    """The summary page's blocks, in order: what was scored, the headline, the ladder and hard-vs-random
    when stage 04 measured them, calibration when the corpus plants effects, evidence-complete retrieval,
    settings, where evidence-complete retrieval and fusion fail, the haystack, the planner and what the
    labels rest on. Each sentence is its claim's (claims.json; lookalike audit derives it again)."""
    def said(rule: str) -> str:
        return s.claims[rule]["text"] if rule in s.claims else ""

    evidence = s.evidence
    macro = evidence_macro(evidence)
    settings_ran, settings_not_run = split_not_run(s.settings_view)
    lost = (s.trace_counts.pivot_table(index="component", columns="method", values="questions_lost", aggfunc="sum")
            .astype(int).reset_index() if len(s.trace_counts) else None)
    if lost is not None:
        lost.columns.name = None
    out: list[Block | None] = [
        Block("What was scored", text=s.claims["scored"]["text"]),
        Block("Headline: each system against easy and hard negatives",
              table=spanned(s.headline) if len(s.headline) else s.headline,
              text="Top-1 against random pages (questions as generated) beside what the top k holds when the "
                   f"competitors are {said('hard_words')} (validated questions). The columns do not "
                   "share a denominator: each has its own n and 95% CI, and they are not subtracted from one another.",
              note=said("ceiling_note"), figure="07_sufficiency"),
        Block("Evidence-complete retrieval (Macro over evidence structures, k = 10)", table=macro,
              text="nDCG and Recall credit any evidence page found; nDCGAll and RecallAll only when every evidence "
                   "page of a question is in the top 10. " + s.macro_words),
        Block("The benchmark's settings, per family", table=settings_ran, footnote=settings_not_run,
              text=f"Each base system (family) as it stands (Base), ranking pages by their document's context "
                   f"alone (Ctx), page score plus document context (B+Ctx), reranked (Rerank) and with query "
                   f"splitting (Q-Split). n = {s.scored} validated single-gold questions, scored against their "
                   f"evidence pages; {s.interval}. A setting that did not run says why.")
        if len(s.settings_view) else None,
        Block("Where evidence-complete retrieval fails", figure="07_source_structure",
              text=f"RecallAll@5 (every evidence page of a question in the top 5) by {s.source_column} and evidence "
                   "structure, with each cell's n; tables/recall_all_by_source.csv holds the 95% CIs.")
        if s.source_cells else None,
        Block("Where fusion loses evidence", table=lost,
              text="Questions whose sufficient page a component system found but the fused top 10 dropped, by "
                   "component and fusion method."),
    ]
    if s.hard_vs_random:
        out.insert(1, Block("Are the hard negatives harder than random ones?", text=said("harder_words")))
    if len(s.ladder):
        fitted = all(v == v for v in (s.ladder_slopes.get("random", float("nan")),
                                      s.ladder_slopes.get("hard", float("nan"))))
        # the chart only where the ladder was measured: an unmeasured ladder is said in words alone
        out.insert(1, Block("Why hard negatives: the validity ladder", figure="04_validity_ladder" if fitted else "",
                            text=ladder_words(s.ladder, dict(s.ladder_slopes))))
    if len(s.effects):
        effects = s.effects
        shown = effects.assign(**{"95% CI": [f"[{lo:.2f}, {hi:.2f}]" if pd.notna(lo) else ""
                                             for lo, hi in zip(effects["lo"].map(as_number), effects["hi"].map(as_number))]})
        out.insert(2, Block("Calibration: what the demo planted, and what the report recovered",
                            table=shown[["effect", "planted", "recovered", "95% CI", "ok", "explanation"]].assign(
                                recovered=shown["recovered"].map(lambda v: f"{v:.3f}" if isinstance(v, float) else v)),
                            text=f"The demo generator plants each effect the design is about and records it "
                                 f"(tables/planted.csv); each row is recovered by the stage that measures it on any "
                                 f"corpus. {int(effects['ok'].sum())} of {len(effects)} effects recovered."))
    if len(s.haystack):
        out.append(Block("How the figures fall as the corpus grows", figure="07_haystack",
                         text=said("haystack_sentence")))
    for heading, rule in (("How many questions a comparison needs", "planner_words"),
                          ("How the labels were made", "labels_made"), ("The people who labelled", "people_words")):
        if said(rule):
            out.append(Block(heading, text=said(rule)))
    out.append(Block("What the labels rest on", text=said("labels_rest_on")))
    if said("flagged_words"):
        out.append(Block("People-judged questions a machine judge flagged", text=said("flagged_words")))
    kept = [b for b in out if b is not None]
    if not s.scored:
        # nothing was scored: the summary says why, and what the labels are, not empty tables and their captions
        kept = [b for b in kept if b.heading in UNSCORED]
    return [replace(b, text=nouned(b.text, s.noun), note=nouned(b.note, s.noun)) for b in kept]

