"""Hard negatives: distractors that share the gold unit's template and differ on exactly one axis.

For a gold unit with template T, entity E, metric M, period P and revision R, the pools are
  period    same T, E, M — another period
  metric    same T, E, P — another metric
  entity    same T, M, P — another entity
  revision  same T, E, M, P — another revision (restatements, which every other pool misses)
and within each pool the k units nearest the gold by appearance (cosine of appearance vectors;
ties by unit id, descending, as everywhere) are its distractors. Units whose metadata lacks an
axis's fields (filler pages have no metric) get an empty pool for that axis, reported as such.
Pools are formed by joining on the fixed keys — never all pairs — so 400,000 units take seconds
(benchmarks/negatives.py).

Corpora without template metadata fall back to clustering: spherical k-means of the page vectors,
then the k nearest units of the gold's own cluster (axis ``cluster``). Random negatives drawn from
the whole corpus (axis ``random``) are the contrast.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from lookalike import memory
from lookalike.eval import stats
from lookalike.retrieval.clustering import spherical_kmeans

AXES = ("period", "metric", "entity", "revision")
MONTAGE_AXES = AXES + ("cluster", "random")   # the rows of a gold-and-distractors montage, in order
FIXED = {
    "period": ("template_id", "entity", "metric"),
    "metric": ("template_id", "entity", "period"),
    "entity": ("template_id", "metric", "period"),
    "revision": ("template_id", "entity", "metric", "period"),
}
COLUMNS = ["gold_unit_id", "unit_id", "axis", "similarity"]


def _present(frame: pd.DataFrame, cols) -> pd.Series:
    ok = pd.Series(True, index=frame.index)
    for c in cols:
        ok &= frame[c].astype(str).str.strip() != ""
    return ok


def _top_k(pairs: pd.DataFrame, k: int) -> pd.DataFrame:
    """Keep the k most similar candidates per (gold, axis): similarity desc, unit id desc."""
    pairs = pairs.sort_values(["gold_unit_id", "axis", "similarity", "unit_id"],
                              ascending=[True, True, False, False], kind="mergesort")
    return pairs.groupby(["gold_unit_id", "axis"], sort=False).head(k)


def hard_negatives(units: pd.DataFrame, vectors: np.ndarray, gold_ids, k: int = 3,
                   axes=AXES) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(distractors, pool_sizes) for the gold units.

    units: the units table (unit_id, template_id, entity, metric, period, revision); vectors:
    float32 (n_units, dim), row i for units.iloc[i], L2-normalised. distractors: gold_unit_id,
    unit_id, axis, similarity. pool_sizes: gold_unit_id, axis, pool (candidates before the top k).

    How: per axis, units are grouped by the fixed keys; within a group one small matrix product
    gives every gold-candidate similarity, candidates that do not differ on the axis (or, for
    period/metric/entity, differ in revision) are masked, and the top k are kept.
    """
    u = units.reset_index(drop=True)
    ids = u["unit_id"].to_numpy(dtype=object)
    is_gold = u["unit_id"].isin(set(gold_ids)).to_numpy()
    revision = u["revision"].astype(str).to_numpy(dtype=object)
    rows_g, rows_c, rows_axis, rows_sim = [], [], [], []
    size_g, size_axis, size_pool = [], [], []
    for axis in axes:
        fixed = list(FIXED[axis])
        varied_col = "revision" if axis == "revision" else axis
        ok = _present(u, fixed + [varied_col]).to_numpy()
        varied = u[varied_col].astype(str).to_numpy(dtype=object)
        golds_here = np.flatnonzero(is_gold)
        pool = dict.fromkeys(golds_here.tolist(), 0)
        sub = np.flatnonzero(ok)
        if len(sub):
            keys = u.iloc[sub][fixed].astype(str)
            group = keys.groupby(fixed, sort=False).ngroup().to_numpy()
            # members of a group, unit id descending, so a stable sort on similarity breaks ties by id
            order = np.lexsort((-_rank_desc(ids[sub]), group))
            sub, group = sub[order], group[order]
            bounds = np.flatnonzero(np.r_[True, group[1:] != group[:-1], True])
            for a, b in zip(bounds[:-1], bounds[1:]):
                members = sub[a:b]
                gold_rows = members[is_gold[members]]
                if len(members) < 2 or not len(gold_rows):
                    continue
                sims = vectors[gold_rows] @ vectors[members].T
                valid = varied[gold_rows][:, None] != varied[members][None, :]
                if axis != "revision":
                    valid &= revision[gold_rows][:, None] == revision[members][None, :]
                for gi, g in enumerate(gold_rows):
                    cand = np.flatnonzero(valid[gi])
                    pool[g] = len(cand)
                    if not len(cand):
                        continue
                    best = cand[np.argsort(-sims[gi, cand], kind="stable")[:k]]
                    rows_g.extend([g] * len(best))
                    rows_c.extend(members[best])
                    rows_axis.extend([axis] * len(best))
                    rows_sim.extend(sims[gi, best])
        size_g.extend(pool.keys())
        size_axis.extend([axis] * len(pool))
        size_pool.extend(pool.values())
    distractors = pd.DataFrame({"gold_unit_id": ids[np.asarray(rows_g, dtype=np.int64)],
                                "unit_id": ids[np.asarray(rows_c, dtype=np.int64)],
                                "axis": rows_axis, "similarity": np.asarray(rows_sim, dtype=np.float64)})
    pool_sizes = pd.DataFrame({"gold_unit_id": ids[np.asarray(size_g, dtype=np.int64)], "axis": size_axis,
                               "pool": np.asarray(size_pool, dtype=np.int64)})
    return distractors, pool_sizes


def _rank_desc(values: np.ndarray) -> np.ndarray:
    """Rank of each string in ascending code point order (so -rank sorts descending)."""
    codes, _ = pd.factorize(np.asarray(values, dtype=object), sort=True)
    return codes


def cluster_negatives(units: pd.DataFrame, vectors: np.ndarray, gold_ids, n_clusters: int, k: int = 3,
                      seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fallback without metadata: within-cluster nearest neighbours (axis 'cluster')."""
    rng = np.random.default_rng([seed, 4])
    centres = spherical_kmeans(vectors, n_clusters, rng)
    assign = np.argmax(vectors @ centres.T, axis=1)
    ids = units["unit_id"].to_numpy()
    row_of = {uid: i for i, uid in enumerate(ids)}
    rows, sizes = [], []
    for gid in gold_ids:
        i = row_of[gid]
        members = np.flatnonzero((assign == assign[i]) & (np.arange(len(ids)) != i))
        sims = vectors[members] @ vectors[i]
        sizes.append({"gold_unit_id": gid, "axis": "cluster", "pool": len(members)})
        rows.extend({"gold_unit_id": gid, "unit_id": ids[m], "axis": "cluster", "similarity": float(s)}
                    for m, s in zip(members, sims))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return _top_k(frame, k)[COLUMNS].reset_index(drop=True), pd.DataFrame(sizes, columns=["gold_unit_id", "axis", "pool"])


def random_negatives(units: pd.DataFrame, gold_ids, n: int, seed: int) -> pd.DataFrame:
    """n units drawn uniformly per gold from the pages that are not its look-alikes — never the gold,
    never a page of the gold's template — axis 'random': the easy contrast the usual screenshot
    test uses. (Drawn from the whole corpus, a corpus of a few templates hands out look-alikes as
    'random' pages: on the ci corpus 9 uniform draws hold a page of the gold's template for 83% of
    the page-single golds. Look-alikes are the hard set's.) A corpus without template_id draws from every other page."""
    ids = units["unit_id"].to_numpy()
    template = units["template_id"].astype(str).to_numpy()
    by_id = dict(zip(ids, template))
    rows = []
    for j, gid in enumerate(sorted(set(gold_ids))):
        rng = np.random.default_rng([seed, 7, j])
        own = by_id.get(gid, "")
        pool = ids[(ids != gid) & ((template != own) | (own == ""))]
        pick = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
        rows.extend({"gold_unit_id": gid, "unit_id": pool[p], "axis": "random", "similarity": np.nan} for p in np.sort(pick))
    return pd.DataFrame(rows, columns=COLUMNS)


def for_questions(questions: pd.DataFrame, distractors: pd.DataFrame) -> pd.DataFrame:
    """distractors.csv rows: query_id, gold_unit_id, unit_id, axis, similarity (one block per evidence unit)."""
    gold = questions[["query_id", "evidence_unit_ids"]].assign(
        gold_unit_id=lambda d: d["evidence_unit_ids"].str.split(";")).explode("gold_unit_id")
    out = gold[["query_id", "gold_unit_id"]].merge(distractors, on="gold_unit_id")
    return out[["query_id", *COLUMNS]].sort_values(["query_id", "gold_unit_id", "axis", "similarity", "unit_id"],
                                                   ascending=[True, True, True, False, False], kind="mergesort")


def without_copies(distractors: pd.DataFrame, duplicates: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kept, dropped): distractor rows whose unit is a byte-identical copy of their gold unit
    (io.corpus.identical_images: same duplicate_of) are dropped — a copy answers exactly as the
    gold does and ties with it in every ranking, so it is no negative."""
    if duplicates is None or not len(duplicates) or not len(distractors):
        return distractors, distractors.head(0)
    group = dict(zip(duplicates["unit_id"], duplicates["duplicate_of"]))
    same = pd.Series([u in group and group[u] == group.get(g) for g, u in
                      zip(distractors["gold_unit_id"], distractors["unit_id"])], index=distractors.index, dtype=bool)
    return distractors[~same].reset_index(drop=True), distractors[same].reset_index(drop=True)


def similarity_to_gold(distractors: pd.DataFrame, units: pd.DataFrame, vectors: np.ndarray) -> pd.DataFrame:
    """How close each kind of distractor is to its gold: mean cosine similarity of the appearance
    vectors per axis (random included), with n — hard distractors should sit closer than random."""
    pos = {u: i for i, u in enumerate(units["unit_id"])}
    v = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    rows = []
    for axis, g in distractors.groupby("axis", sort=True):
        pairs = [(pos[a], pos[b]) for a, b in zip(g["gold_unit_id"], g["unit_id"]) if a in pos and b in pos]
        sims = [float(v[a] @ v[b]) for a, b in pairs]
        rows.append({"axis": axis, "n": len(sims), "similarity_to_gold": float(np.mean(sims)) if sims else float("nan")})
    return pd.DataFrame(rows, columns=["axis", "n", "similarity_to_gold"])


def pool_summary(pool_sizes: pd.DataFrame) -> pd.DataFrame:
    """Per axis: golds, mean and median pool size, share of golds with an empty pool."""
    g = pool_sizes.groupby("axis", sort=True)["pool"]
    return pd.DataFrame({"golds": g.size(), "mean_pool": g.mean(), "median_pool": g.median(),
                         "empty_share": g.apply(lambda s: float((s == 0).mean()))}).reset_index()


def top1_within(scores: np.ndarray, unit_ids, query_ids, gold: dict, candidates: dict,
                corpus: _Corpus | None = None) -> pd.Series:
    """1 when a gold unit outranks every candidate for the query (score desc, ties by unit id desc).

    scores: (n_queries, n_units) system scores; gold[qid]: the gold unit id, or a set of acceptable
    unit ids (any of them counts); candidates[qid]: unit ids competing with the gold (None: the
    whole corpus). corpus: the unit ids' lookups (made here when not given; top1_outcomes makes them
    once for every block). Returns a 0/1 Series indexed by query id.
    """
    corpus = corpus or _Corpus(unit_ids)
    out = {}
    for qi, q in enumerate(query_ids):
        golds = {gold[q]} if isinstance(gold[q], str) else set(gold[q])
        if candidates.get(q) is None:
            # the whole corpus: the highest score, and among units tied on it the greatest unit id
            row = np.asarray(scores[qi])
            tied = np.flatnonzero(row == row.max()) if len(row) else np.array([], dtype=np.int64)
            out[q] = float(len(tied) > 0 and corpus.ids[tied[np.argmax(corpus.id_rank[tied])]] in golds)
            continue
        pool = sorted(set(candidates[q]) | golds)
        s = scores[qi, [corpus.column[u] for u in pool]]
        best = max(zip(s, pool))                          # score, then unit id, both descending
        out[q] = float(best[1] in golds)
    return pd.Series(out, dtype="float64")


class _Corpus:
    """The unit ids as top1_within reads them: an array, each id's column, and each id's position in
    the sorted ids (the tie rule) — made once per corpus, not once per block of questions."""

    def __init__(self, unit_ids):
        self.ids = np.asarray(list(unit_ids), dtype=object)
        self.column = {u: i for i, u in enumerate(self.ids)}
        self.id_rank = np.empty(len(self.ids), dtype=np.int64)
        self.id_rank[np.argsort(self.ids, kind="stable")] = np.arange(len(self.ids))


# score cells of one block of questions held at once (64 MB of float32): the whole-corpus top-1 needs every
# unit's score for a question, never every question's at once
TOP1_BLOCK_CELLS = 1 << 24


def top1_outcomes(score_rows, unit_ids, query_ids, gold: dict, sets: dict) -> pd.DataFrame:
    """Each question's top-1 against each set of negatives: a frame indexed by query_ids with one column
    per set (sets[name][qid]: competing unit ids, or None for the whole corpus) holding 1 when a gold
    outranks every candidate (top1_within), 0 when not, and NaN when the question has no candidates of
    that kind (left out of that set's n, never counted as a win). score_rows(positions) gives the
    questions at those positions of query_ids scored against every unit, (len(positions), n_units); it
    is called for a block of questions at a time, so no question x unit matrix is held."""
    query_ids, unit_ids = list(query_ids), list(unit_ids)
    corpus = _Corpus(unit_ids)
    block = max(1, TOP1_BLOCK_CELLS // max(1, len(unit_ids)))
    parts: dict[str, list[pd.Series]] = {name: [] for name in sets}
    with memory.returning_freed_blocks():
        for a in range(0, len(query_ids), block):
            rows = range(a, min(a + block, len(query_ids)))
            matrix = score_rows(rows)
            qs = query_ids[rows.start:rows.stop]
            for name, cands in sets.items():
                keep = [i for i, q in enumerate(qs) if cands.get(q) is None or len(cands[q])]
                parts[name].append(top1_within(matrix[keep], unit_ids, [qs[i] for i in keep], gold, cands, corpus))
    return pd.DataFrame({name: pd.concat(p).reindex(query_ids) if p else pd.Series(dtype="float64")
                         for name, p in parts.items()}, index=pd.Index(query_ids, name="query_id"), dtype="float64")


TOP1_COLUMNS = ["system", "negatives", "n", "top1", "top1_lo", "top1_hi", "chance", "interval"]


def top1_chance(unit_ids, query_ids, gold: dict, candidates: dict) -> float:
    """What a system ranking at random scores at top-1 against these candidates: per question, the
    share of its candidate set (candidates plus gold) that counts as the gold, averaged over the
    questions (NaN with none)."""
    shares = []
    everything = set(unit_ids)
    for q in query_ids:
        golds = {gold[q]} if isinstance(gold[q], str) else set(gold[q])
        if candidates.get(q) is None:
            shares.append(len(golds & everything) / len(everything) if everything else float("nan"))
            continue
        pool = set(candidates[q]) | golds
        shares.append(len(golds & pool) / len(pool) if pool else float("nan"))
    return float(np.mean(shares)) if shares else float("nan")


def harder(outcomes: pd.DataFrame, easy: str, hard: str, seed: int = 0, n_boot: int = 2000,
           clusters: pd.Series | None = None) -> dict:
    """Is the hard set harder than the easy one for this system? The paired difference of top-1
    (easy − hard) over the questions that have both kinds of negatives, with a bootstrap 95% CI
    (clusters resampled when given). outcomes: top1_outcomes' frame; easy, hard: two of its columns.
    harder: the CI lies above 0."""
    a, b = outcomes[easy], outcomes[hard]
    both = a.notna() & b.notna()
    keep = list(outcomes.index[both])
    diff, lo, hi, _ = stats.paired_bootstrap(a[both].to_numpy(), b[both].to_numpy(), n_boot,
                                             rng=np.random.default_rng([seed, 71]),
                                             clusters=stats.cluster_array(clusters, keep))
    return {"n": len(keep), "difference": diff, "lo": lo, "hi": hi, "harder": bool(len(keep) and lo > 0)}


def top1_table(outcomes: dict, unit_ids, gold: dict, sets: dict, seed: int, n_boot: int = 2000,
               clusters: pd.Series | None = None) -> pd.DataFrame:
    """Top-1 per system and set of negatives, each with its own n and bootstrap 95% CI (resampling
    the questions' clusters when given; every system draws the same resamples).

    outcomes[system]: top1_outcomes' frame over the same sets (sets[name][qid]: competing unit ids, or
    None for the whole corpus). A question whose candidate list is empty has no negatives of that kind
    and is left out of that row's n (never counted as a win). chance: top-1 of a random ranking over the
    same candidate sets (top1_chance), the figure each row is read against.
    """
    rows = []
    for name, frame in outcomes.items():
        for c, (negs, cands) in enumerate(sets.items()):
            top1 = frame[negs].dropna()
            keep = list(top1.index)
            ci = stats.bootstrap_ci(top1.to_numpy(), n_boot, rng=np.random.default_rng([seed, c]),
                                    clusters=stats.cluster_array(clusters, keep))
            rows.append({"system": name, "negatives": negs, "n": ci.n, "top1": ci.estimate, "top1_lo": ci.lo,
                         "top1_hi": ci.hi, "chance": top1_chance(unit_ids, keep, gold, cands),
                         "interval": stats.interval_words(clusters)})
    return pd.DataFrame(rows, columns=TOP1_COLUMNS)


def look_alikes(units: pd.DataFrame, vectors: np.ndarray, gold_ids, k: int, n_clusters: int, cluster_k: int,
                seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(distractors, pool_sizes) for the gold units, each gold by the best method its metadata allows:
    per-axis pools where the corpus names templates (hard_negatives), and for every gold that gets no
    per-axis distractor and has no other unit of its template — no template_id, a template of one, or a
    corpus without metadata — the cluster_k nearest units of its appearance cluster over the whole
    corpus (axis 'cluster'). So a corpus with metadata on some units still gives every gold look-alikes."""
    golds = sorted(set(gold_ids))
    has_metadata = bool((units["template_id"].astype(str) != "").any())
    if has_metadata:
        hard, pool_sizes = hard_negatives(units, vectors, golds, k=k)
    else:
        hard, pool_sizes = hard_negatives(units.head(0), vectors[:0], [], k=k)
    template = units.set_index("unit_id")["template_id"].astype(str)
    size = template[template != ""].value_counts()
    covered = set(hard["gold_unit_id"])
    bare = [g for g in golds if g not in covered and int(size.get(template.get(g, ""), 0)) < 2]
    if bare:
        ch, cp = cluster_negatives(units, vectors, bare, n_clusters, k=cluster_k, seed=seed)
        hard = pd.concat([hard, ch], ignore_index=True) if len(hard) else ch
        pool_sizes = pd.concat([pool_sizes, cp], ignore_index=True) if len(pool_sizes) else cp
    return hard, pool_sizes


def planned_methods(units: pd.DataFrame, gold_ids) -> dict[str, int]:
    """How many of these golds each distractor method will cover, read from the metadata alone (lookalike
    check says it before a run): per-axis where the gold has the fields of some axis's pool filled,
    its template where the template has other units, its appearance cluster otherwise."""
    u = units.reindex(columns=list({"unit_id", "template_id", *AXES, *[c for f in FIXED.values() for c in f]}),
                      fill_value="").astype(str).set_index("unit_id")
    size = u.loc[u["template_id"] != "", "template_id"].value_counts()
    out = {"per-axis": 0, "template": 0, "cluster": 0}
    for g in gold_ids:
        if g not in u.index:
            continue
        row = u.loc[g]
        axis_ok = any(all(row[c].strip() for c in (*FIXED[a], a)) for a in AXES)
        siblings = int(size.get(row["template_id"], 0)) >= 2 if row["template_id"] else False
        out["per-axis" if axis_ok and siblings else "template" if siblings else "cluster"] += 1
    return {k: v for k, v in out.items() if v}


TEMPLATE_K = 200     # negatives.template_k's default (base.yaml): a template's look-alikes per gold


def hard_candidates(questions: pd.DataFrame, distractors: pd.DataFrame, units: pd.DataFrame,
                    template_k: int = TEMPLATE_K) -> dict[str, list[str]]:
    """Each question's hard candidate set, as stages 06 (pooled for labelling) and 07 (ranked for
    sufficient@k under hard negatives) use it: its evidence units, their look-alikes from stage 04
    (axis != random: per-axis pools or appearance clusters) and the other units of each evidence
    unit's template — every one of them while the template has at most template_k others, else
    template_k of them (template_sample). Units without a template_id add no template look-alikes."""
    return {q: c for q, (c, _) in _hard_sets(questions, distractors, units, template_k).items()}


def capped_templates_note(units: pd.DataFrame, template_k: int) -> str:
    """The sentence a stage says when some template has more look-alikes than template_k ('' when none)."""
    if "template_id" not in units.columns:
        return ""
    sizes = units.groupby(units["template_id"].astype(str)).size()
    capped = sizes[(sizes.index != "") & (sizes - 1 > template_k)]
    if not len(capped):
        return ""
    return (f"{len(capped)} template{'s' if len(capped) != 1 else ''} hold more than {template_k} other units (the "
            f"largest has {int(capped.max())} units): a gold's look-alikes from its template are {template_k} of them, the same "
            "on every run (negatives.template_k)")


def template_sample(gold: str, others: list[str], template_k: int) -> list[str]:
    """A gold's template look-alikes: all of others while there are at most template_k, else the
    template_k that come first in an order fixed by a hash of (gold, unit id) — the same ones on every
    run and for every question of that gold, whatever order the corpus listed them in. Without a cap a
    question's candidates grow with its template, and a corpus whose templates grow with it asks for
    labels quadratic in its size (20,000 units of five templates: 4,000 pairs a question)."""
    if len(others) <= template_k:
        return others
    key = lambda u: hashlib.sha256(f"{gold}\x1f{u}".encode()).digest()  # noqa: E731
    keep = set(sorted(others, key=key)[:template_k])
    return [u for u in others if u in keep]


# the distractor methods, best first: what a question's hard set is made of (hard_sets' method column)
METHODS = {"per-axis": "per-axis pools: units of the gold's template that differ from it in one field",
           "template": "the gold's template: every other unit of it, or a fixed sample of negatives.template_k "
                       "of them in a larger template (no per-axis pool: the metadata names no metric or period to vary)",
           "cluster": "the gold's appearance cluster: its nearest units by appearance (no template names its "
                      "look-alikes)",
           "none": "no look-alike: no template and no appearance neighbour"}
HARD_SET_COLUMNS = ["query_id", "method", "candidates", "in_hard", "reason"]


def _hard_sets(questions: pd.DataFrame, distractors: pd.DataFrame, units: pd.DataFrame,
               template_k: int = TEMPLATE_K) -> dict:
    """query_id -> (candidates, gold first; the method that made them)."""
    template = units.set_index("unit_id")["template_id"].astype(str)
    by_template = {t: list(g) for t, g in units.groupby(units["template_id"].astype(str), sort=True)["unit_id"] if t}
    near = distractors[distractors["axis"] != "random"]
    hard = near.groupby("query_id")["unit_id"].apply(list).to_dict()
    axes = near.groupby("query_id")["axis"].apply(set).to_dict()
    out = {}
    for q, ev in zip(questions["query_id"], questions["evidence_unit_ids"]):
        golds = [u for u in str(ev).split(";") if u]
        extra = list(hard.get(q, []))
        siblings = [u for g in golds
                    for u in template_sample(g, [x for x in by_template.get(template.get(g, ""), []) if x != g], template_k)]
        extra += siblings
        seen = set(golds)
        cands = golds + [u for u in extra if not (u in seen or seen.add(u))]
        used = axes.get(q, set())
        method = ("per-axis" if used & set(AXES) else "template" if siblings else "cluster" if "cluster" in used
                  else "none")
        out[q] = (cands, method)
    return out


def hard_sets(questions: pd.DataFrame, distractors: pd.DataFrame, units: pd.DataFrame, scored: set,
              k_max: int, template_k: int = TEMPLATE_K) -> tuple[dict[str, list[str]], pd.DataFrame]:
    """(candidates of the questions in the hard columns, one row per question: query_id, method,
    candidates, in_hard, reason). A question is in the hard columns when it is scored there (scored:
    the validated single-gold questions with one evidence unit) and its candidate set (the gold and
    its look-alikes) is larger than k_max, the largest k the hard columns report: with k_max
    candidates or fewer the top k_max holds the gold whatever the system does, so sufficient@k_max
    would be 1 by construction."""
    sets = _hard_sets(questions, distractors, units, template_k)
    rows, kept = [], {}
    for q in questions["query_id"]:
        cands, method = sets[q]
        n = len(cands)
        if q not in scored:
            reason = "not a validated single-gold question with one evidence unit"
        elif n <= k_max:
            reason = (f"{n} candidate{'s' if n != 1 else ''} (the gold and {n - 1} look-alike{'s' if n != 2 else ''}), "
                      f"not more than {k_max}: the top {k_max} would hold the gold by construction")
        else:
            reason = ""
            kept[q] = cands
        rows.append({"query_id": q, "method": method, "candidates": n, "in_hard": not reason, "reason": reason})
    return kept, pd.DataFrame(rows, columns=HARD_SET_COLUMNS)


# ----------------------------------------------------------------------------- validity ladder

LADDER_PS = (0.0, 0.25, 0.5, 0.75, 1.0)
LADDER_COLUMNS = ["p", "negatives", "n", "top1", "top1_lo", "top1_hi", "interval"]


def ladder_scores(units: pd.DataFrame, gold: dict, candidates: dict, p: float, rng: np.random.Generator) -> dict:
    """One synthetic system of known sibling discrimination p, as each question's top-1 (0/1).

    The system always ranks the gold's template first; among the candidates of that template (the
    gold and its look-alikes) it puts the gold first with probability p, otherwise a look-alike
    (which one does not change top-1). A question whose candidates hold no page of the gold's template is won
    whatever p is: nothing competes at the template level."""
    template = units.set_index("unit_id")["template_id"].astype(str).to_dict()
    out = {}
    for q in sorted(gold):
        g = gold[q]
        siblings = sorted(u for u in candidates[q] if u != g and template.get(u) == template.get(g))
        draw = rng.random()                   # drawn for every question, so the rungs share their draws
        out[q] = 1.0 if not siblings or draw < p else 0.0
    return out


def validity_ladder(units: pd.DataFrame, gold: dict, sets: dict, seed: int, ps=LADDER_PS, n_boot: int = 2000,
                    clusters: pd.Series | None = None) -> pd.DataFrame:
    """The design's warning made visible: a metric can stay flat while the property it should
    measure varies. For each sibling discrimination p (LADDER_PS) a synthetic system is scored
    under each set of negatives (sets: name -> {qid: candidate ids}; a question without candidates
    of a kind is left out of that row's n). Top-1 with its bootstrap 95% CI (clusters as the other
    top-1 tables). Under random negatives top-1 stays near 1 whatever p is; under hard negatives
    it follows p."""
    rows = []
    for c, (negs, cands) in enumerate(sets.items()):
        keep = {q: g for q, g in gold.items() if cands.get(q)}
        for i, p in enumerate(ps):
            rng = np.random.default_rng([seed, 83, c])     # the same draws on every rung: top-1 rises with p
            won = ladder_scores(units, keep, cands, p, rng)
            ids = sorted(won)
            ci = stats.bootstrap_ci(np.array([won[q] for q in ids]), n_boot, rng=np.random.default_rng([seed, 84, c, i]),
                                    clusters=stats.cluster_array(clusters, ids))
            rows.append({"p": float(p), "negatives": negs, "n": ci.n, "top1": ci.estimate, "top1_lo": ci.lo,
                         "top1_hi": ci.hi, "interval": stats.interval_words(clusters)})
    return pd.DataFrame(rows, columns=LADDER_COLUMNS)


def ladder_slopes(ladder: pd.DataFrame) -> dict:
    """Least-squares slope of top-1 on p per set of negatives."""
    out = {}
    for negs, part in ladder.groupby("negatives", sort=True):
        # read back from a CSV, an unmeasured rung is '' (no question had that kind of negative): left out
        x, y = pd.to_numeric(part["p"], errors="coerce").to_numpy(float), pd.to_numeric(part["top1"], errors="coerce").to_numpy(float)
        keep = ~(np.isnan(x) | np.isnan(y))
        x, y = x[keep], y[keep]
        # rounded to 9 places (and -0.0 made 0.0): a flat line prints as 0 on every machine
        out[negs] = (round(float(np.polyfit(x, y, 1)[0]), 9) + 0.0) if len(x) > 1 and np.ptp(x) > 0 else float("nan")
    return out


# ----------------------------------------------------------------------------- document level

def document_scores(scores: np.ndarray, unit_doc_ids) -> tuple[np.ndarray, list]:
    """Page scores (n_queries, n_units) -> document scores (n_queries, n_docs), each document
    taking its best page; documents in sorted order."""
    docs = np.asarray(unit_doc_ids, dtype=object)
    order = np.argsort(docs, kind="stable")
    sorted_docs = docs[order]
    starts = np.flatnonzero(np.r_[True, sorted_docs[1:] != sorted_docs[:-1]])
    out = np.maximum.reduceat(np.asarray(scores)[:, order], starts, axis=1) if len(order) else np.zeros((len(scores), 0))
    return out, list(sorted_docs[starts])


def document_negatives(docs: pd.DataFrame, gold: dict, seed: int) -> tuple[dict, dict]:
    """For document-level questions (gold[qid]: its one relevant document), hard negatives: the
    documents of the same entity in another period; random negatives: as many documents drawn
    from all the others (seeded). docs: doc_id, entity, period. Returns (hard, random), each
    qid -> list of doc ids; a question whose document has no entity/period gets no hard negatives."""
    meta = docs.set_index("doc_id")
    all_docs = sorted(meta.index)
    hard, rand = {}, {}
    for j, (q, d) in enumerate(sorted(gold.items())):
        e, p = meta.loc[d, "entity"], meta.loc[d, "period"]
        hard[q] = sorted(meta.index[(meta["entity"] == e) & (meta["period"] != p)]) if e and p else []
        others = [x for x in all_docs if x != d]
        n = len(hard[q]) or min(3, len(others))
        pick = np.random.default_rng([seed, 12, j]).choice(len(others), size=min(n, len(others)), replace=False)
        rand[q] = sorted(others[i] for i in pick)
    return hard, rand
