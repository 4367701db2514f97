"""The measure registry: every measure lookalike computes, as a parseable object.

In the spirit of ir_measures, a measure is an object that knows its name in both spellings, its
cutoff or parameter, how it aggregates over queries, which labels it needs and how it prints.
Both spellings parse to the same measure and compare equal:

  trec_eval / ir_measures style      object
  ndcg_cut_10      nDCG@10           Measure(family="ndcg_cut", k=10)
  recall_all_10    RecallAll@10      evidence-complete: every relevant unit in the top k
  ndcg_all_10      nDCGAll@10
  sufficient_5     Sufficient@5      three-way labels (sufficient 2, supporting 1, irrelevant 0)
  supporting_only_5 SupportingOnly@5
  neither_5        Neither@5
  judged_10        Judged@10         share of the top min(k, num_ret) carrying any judgement
  P_5              P@5, P(rel=2)@5   a relevance level of its own overrides the run's -l level
  top1             Top1
  recip_rank       RR

trec_eval's parameter forms (``P.5,10``, ``ndcg_cut.10``, ``iprec_at_recall.0,.5``) and
``official`` / ``all_trec`` expand to trec_eval names. A measure keeps the spelling it was asked
for (``str(m)``), so ``lookalike eval -m nDCG@10`` prints ``nDCG@10`` and ``-m ndcg_cut_10``
prints ``ndcg_cut_10`` as trec_eval does. The per-query functions live in
``lookalike.eval.metrics`` (one function per family, registered in ``COMPUTE`` there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Iterable, Sequence

from lookalike import registry

# aggregation over queries: mean (trec_eval's 'all' line), sum (counts), gmean (gm_map), count (num_q)
AGGREGATIONS = ("mean", "sum", "gmean", "count")
# what a measure reads from the judgements: binary relevance at a level, graded gains, the
# three-way labels, or only whether a unit carries a judgement
NEEDS = ("binary", "graded", "three-way", "judged", "none")


class MeasureError(ValueError):
    """An unknown measure name or malformed cutoff."""


@dataclass(frozen=True)
class Family:
    """A measure family (nDCG, P, recall, ...): its names in trec_eval's and ir_measures' spelling, whether it
    takes a cutoff, how it aggregates over queries, and what judgements it needs."""
    name: str              # trec-style base: "ndcg_cut"
    pretty: str            # ir_measures-style base: "nDCG"
    cutoff: str            # "required" (P@k), "none" (map), or "recall" (iprec_at_recall_x)
    aggregation: str = "mean"
    needs: str = "binary"
    integer: bool = False  # printed as an integer (counts)
    doc: str = ""


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("num_q", "NumQ", "none", "count", "none", True, "queries evaluated"),
    Family("num_ret", "NumRet", "none", "sum", "none", True, "units retrieved"),
    Family("num_rel", "NumRel", "none", "sum", "binary", True, "relevant units judged"),
    Family("num_rel_ret", "NumRelRet", "none", "sum", "binary", True, "relevant units retrieved"),
    Family("map", "AP", "none", "mean", "binary", doc="mean average precision"),
    Family("gm_map", "GMAP", "none", "gmean", "binary", doc="geometric mean of AP (floor 1e-5, as trec_eval)"),
    Family("Rprec", "Rprec", "none", "mean", "binary", doc="precision at R (the query's relevant count)"),
    Family("bpref", "Bpref", "none", "mean", "binary", doc="trec_eval's bpref"),
    Family("recip_rank", "RR", "none", "mean", "binary", doc="reciprocal rank of the first relevant unit"),
    Family("ndcg", "nDCG", "none", "mean", "graded", doc="nDCG over the whole ranking, linear gain"),
    Family("ndcg_exp", "nDCGExp", "none", "mean", "graded", doc="nDCG, gain 2^rel - 1 (gdeval)"),
    Family("top1", "Top1", "none", "mean", "binary", doc="1 when the first unit is relevant"),
    Family("P", "P", "required", doc="precision at k"),
    Family("recall", "R", "required", doc="recall at k"),
    Family("success", "Success", "required", doc="1 when a relevant unit is in the top k"),
    Family("ndcg_cut", "nDCG", "required", needs="graded", doc="nDCG at k, linear gain (trec_eval)"),
    Family("ndcg_exp_cut", "nDCGExp", "required", needs="graded", doc="nDCG at k, gain 2^rel - 1 (gdeval)"),
    Family("recall_all", "RecallAll", "required", doc="1 when every relevant unit is in the top k (VL-DocIR)"),
    Family("ndcg_all", "nDCGAll", "required", needs="graded", doc="nDCG@k when every relevant unit is in the top k"),
    Family("sufficient", "Sufficient", "required", needs="three-way", doc="the top k holds a sufficient unit"),
    Family("supporting_only", "SupportingOnly", "required", needs="three-way",
           doc="the top k holds a supporting unit and no sufficient one"),
    Family("neither", "Neither", "required", needs="three-way", doc="the top k holds neither"),
    Family("judged", "Judged", "optional", needs="judged",
           doc="share of the top min(k, num_ret) that is judged (the whole ranking without k)"),
    Family("iprec_at_recall", "IPrec", "recall", doc="interpolated precision at recall x"),
    Family("map_cut", "AP", "required", doc="average precision over the top k, divided by all relevant (trec_eval)"),
    Family("relative_P", "RelP", "required", doc="relevant in the top k over min(k, num_rel) (trec_eval)"),
    Family("gm_bpref", "GMBpref", "none", "gmean", "binary", doc="geometric mean of bpref (floor 1e-5, as trec_eval)"),
    Family("num_nonrel_judged_ret", "NumNonRelJudgedRet", "none", "sum", "judged", True,
           "judged non-relevant units retrieved"),
    Family("set_P", "SetP", "none", doc="relevant retrieved over retrieved (the whole ranking as a set)"),
    Family("set_recall", "SetR", "none", doc="relevant retrieved over relevant"),
    Family("set_F", "SetF", "none", doc="harmonic mean of set_P and set_recall"),
    Family("set_map", "SetAP", "none", doc="set_P times set_recall (trec_eval's set_map)"),
    Family("set_relative_P", "SetRelP", "none", doc="relevant retrieved over min(num_ret, num_rel)"),
    Family("Rprec_mult", "RprecMult", "recall", doc="precision at x times R (trec_eval)"),
    Family("11pt_avg", "IPrecAvg11", "none", doc="mean interpolated precision at recall 0, 0.1, ..., 1"),
    Family("utility", "Utility", "none", doc="relevant retrieved minus non-relevant retrieved (trec_eval's default "
                                             "coefficients 1, -1, 0, 0)"),
    Family("rbp", "RBP", "optional",
           doc="rank-biased precision: trec_eval's rbp (p 0.9, grade over the query's top grade), ir_measures' RBP "
               "(p 0.8, binary), ranx's rbp.p (raw grades)"),
    Family("rbp_resid", "RBPResid", "none", needs="judged",
           doc="what the unjudged units (and the ranking's tail) could still add to rbp"),
    Family("unj", "Unjudged", "required", needs="judged", doc="share of the top k that is unjudged (k as denominator)"),
    Family("infAP", "infAP", "none", doc="inferred AP (Yilmaz & Aslam): -1 judgements are pooled but unjudged"),
    Family("binG", "binG", "none", doc="trec_eval's binary G: relevant units at 1 / log2(2 + non-relevant above)"),
    Family("G", "G", "none", needs="graded", doc="trec_eval's normalised gain G (gain map as ndcg's)"),
    Family("ndcg_rel", "nDCGRel", "none", needs="graded", doc="nDCG averaged at the relevant units (trec_eval)"),
    Family("Rndcg", "Rndcg", "none", needs="graded", doc="nDCG averaged at the R levels of the ideal gains (trec_eval)"),
    Family("relstring", "RelString", "optional", "none", "judged",
           doc="the labels of the top N (default 10) as text: a digit, > above 9, - not in the qrels, . judged -1; "
               "per query only"),
    Family("recip_rank_cut", "RR", "required", doc="reciprocal rank of the first relevant unit within the top k"),
    Family("err_cut", "ERR", "required", needs="graded",
           doc="expected reciprocal rank at k, as gdeval: grade g stops a reader with (2^g - 1) / 16"),
    Family("hits", "Hits", "required", doc="relevant units in the top k (a count per query, averaged: ranx)"),
    Family("dcg", "DCG", "none", needs="graded", doc="DCG over the whole ranking, linear gain (ranx)"),
    Family("dcg_cut", "DCG", "required", needs="graded", doc="DCG at k, linear gain, log2(rank + 1) discount (ranx)"),
    Family("dcg_exp_cut", "DCGExp", "required", needs="graded", doc="DCG at k, gain 2^grade - 1 (ranx's dcg_burges)"),
    Family("f1", "F1", "optional", doc="harmonic mean of P@k and R@k (ranx; the whole ranking without k)"),
    Family("compat", "Compat", "none", needs="graded",
           doc="Clarke et al.'s compatibility: rank-biased overlap with the ideal ranking, normalised (ir_measures)"),
)}
# families whose value is text, not a number: per query only, never averaged
TEXT_FAMILIES = {"relstring"}
# ranx's names (lower case; "@k" for a cutoff; "-l2" for a relevance level) for the families they
# compute the same way: without a cutoff, and with one. ranx's rbp.95 (persistence 0.95) is parsed apart.
# ranx's names without a cutoff: its precision then reads the whole ranking (ranx's k = 0), which is
# trec_eval's set_P; a bare recall is trec_eval's (recall at its default cutoffs), and ranx's hits without a
# cutoff is refused in words (_did_you_mean)
RANX = {"ndcg": "ndcg", "ndcg_burges": "ndcg_exp", "map": "map", "mrr": "recip_rank", "r-precision": "Rprec",
        "bpref": "bpref", "dcg": "dcg", "f1": "f1", "precision": "set_P"}
RANX_CUT = {"ndcg": "ndcg_cut", "ndcg_burges": "ndcg_exp_cut", "map": "map_cut", "precision": "P", "recall": "recall",
            "hit_rate": "success", "mrr": "recip_rank_cut", "hits": "hits", "dcg": "dcg_cut", "f1": "f1",
            "dcg_burges": "dcg_exp_cut"}
_RANX_RE = re.compile(r"^(?P<base>[a-z][a-z0-9_\-]*?)(?:@(?P<k>[^@]+))?$")
# ir_measures' other names for its measures (ir_measures.MAP is AP, and so on)
IR_ALIASES = {"MAP": "AP", "MRR": "RR", "NDCG": "nDCG", "Precision": "P", "Recall": "R", "RPrec": "Rprec",
              "BPref": "Bpref", "SetRecall": "SetR", "NumRelRet": "NumRelRet"}
_BY_PRETTY: dict[tuple[str, bool], Family] = {}
for _f in FAMILIES.values():
    # nDCG@k and nDCG name two families (cutoff and none); the cutoff decides which
    if _f.cutoff in ("none", "optional"):
        _BY_PRETTY.setdefault((_f.pretty, False), _f)
    if _f.cutoff in ("required", "recall", "optional"):
        _BY_PRETTY.setdefault((_f.pretty, True), _f)
TREC_DEFAULT = ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                *[f"iprec_at_recall_{x / 10:.2f}" for x in range(11)],
                "P_5", "P_10", "P_15", "P_20", "P_30", "P_100", "P_200", "P_500", "P_1000"]
_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
# trec_eval's all_trec set in the order it prints it (after runid); relstring prints per query only
ALL_TREC = ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
            *[f"iprec_at_recall_{x / 10:.2f}" for x in range(11)], *[f"P_{k}" for k in _CUTS], "relstring",
            *[f"recall_{k}" for k in _CUTS], "infAP", "gm_bpref", *[f"Rprec_mult_{x / 10:.2f}" for x in range(2, 21, 2)],
            "utility", "11pt_avg", "binG", "G", "ndcg", "ndcg_rel", "Rndcg", *[f"ndcg_cut_{k}" for k in _CUTS],
            *[f"map_cut_{k}" for k in _CUTS], *[f"relative_P_{k}" for k in _CUTS], "success_1", "success_5",
            "success_10", "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret",
            "rbp", "rbp_resid", "unj_5", "unj_10", "unj_20"]
# trec_eval's measure table order: lines print in it whatever order the command line gave
TREC_ORDER = list(dict.fromkeys(_TREC_BASE for _TREC_BASE in (
    re.sub(r"_(\d+|\d*\.\d+)$", "", n) for n in ALL_TREC)))
# the cutoffs (or recall points) trec_eval uses when a measure is named without any: -m P, -m ndcg_cut
DEFAULT_CUTOFFS = {"P": _CUTS, "recall": _CUTS, "ndcg_cut": _CUTS, "map_cut": _CUTS, "relative_P": _CUTS,
                   "success": (1, 5, 10), "unj": (5, 10, 20)}
DEFAULT_POINTS = {"iprec_at_recall": tuple(x / 10 for x in range(11)),
                  "Rprec_mult": tuple(x / 10 for x in range(2, 21, 2))}
# trec_eval's measure groups
GROUPS = {"set": ["set_P", "set_relative_P", "set_recall", "set_map", "set_F"]}
_TREC_RE = re.compile(r"^(?P<base>[A-Za-z][A-Za-z0-9_]*?)_(?P<k>\d+)$")
_IPREC_RE = re.compile(r"^(?P<base>iprec_at_recall|Rprec_mult)_(?P<x>\d*\.?\d+)$")
# ir_measures' printed form: Name, Name@k, Name(key=value, ...)@k
_IR_RE = re.compile(r"^(?P<base>[A-Za-z][A-Za-z0-9]*)(?:\((?P<args>[^()]*)\))?(?:@(?P<k>[^@()]+))?$")


@dataclass(frozen=True)
class Measure:
    """One measure: its family, cutoff k (or recall point x), and an own relevance level (rel).

    Equal measures compare equal whatever their spelling; ``str()`` gives the spelling asked for.
    """

    family: str
    k: int | None = None
    x: float | None = None
    rel: int | None = None
    # trec_eval's measure parameters (utility's four coefficients, 11pt_avg's recall points, ndcg's
    # level=gain pairs) and their text as written, which trec_eval prints in the measure's name
    params: tuple = ()
    param_text: str = field(default="", compare=False)
    spelled: str = field(default="", compare=False)
    # other libraries' keyword parameters, sorted (key, value) pairs: RBP's persistence p and gain rule,
    # SetF's beta, Compat's p and normalize, Judged's rule for -1 labels, judged_only (trec_eval -J)
    opts: tuple = ()

    def opt(self, key: str, default=None):
        """The value of a dialect's keyword option (``opts``), or default."""
        return dict(self.opts).get(key, default)

    @property
    def info(self) -> Family:
        """The measure's family."""
        return FAMILIES[self.family]

    @property
    def aggregation(self) -> str:
        """How the family aggregates over queries (mean, sum, ...)."""
        return self.info.aggregation

    @property
    def needs(self) -> str:
        """What judgements the family needs (binary or graded)."""
        return self.info.needs

    @property
    def integer(self) -> bool:
        """Whether the value is a count (printed as an integer)."""
        return self.info.integer

    @property
    def trec_name(self) -> str:
        """trec_eval's spelling (P_5, ndcg_cut_10, iprec_at_recall_0.50); a level of its own is
        written as ir_measures does, since trec_eval has no per-measure level."""
        if self.rel is not None:
            return self.pretty_name
        if self.params:
            return f"{self.family}_{self.param_text}"
        if self.opts and self.family in ("rbp", "rbp_resid", "set_F", "compat", "judged") or self.opt("judged_only"):
            return self.pretty_name
        if self.k is not None:
            return f"{self.family}_{self.k}"
        if self.x is not None:
            return f"{self.family}_{self.x:.2f}"
        return self.family

    @property
    def text(self) -> bool:
        """Whether the measure's value is text (relstring): per query only, never averaged."""
        return self.family in TEXT_FAMILIES

    @property
    def pretty_name(self) -> str:
        """ir_measures' spelling: nDCG@10, P(rel=2)@5, RecallAll@10, RR, RBP(p=0.9)."""
        args = ([f"rel={self.rel}"] if self.rel is not None else []) + [
            f"{k}={v!r}" for k, v in self.opts if k not in ("gain", "rule", "min_rel")]
        base = self.info.pretty + (f"({','.join(args)})" if args else "")
        if self.params:
            return f"{base}({self.param_text})"
        if self.k is not None:
            return f"{base}@{self.k}"
        if self.x is not None:
            return f"{base}@{self.x:g}"
        return base

    def __str__(self) -> str:
        return self.spelled or self.trec_name

    def format(self, value: float) -> str:
        """trec_eval's printing: counts as integers, everything else with 4 decimals."""
        if self.integer:
            return str(int(round(value)))
        if value != value:
            return "nan"
        return f"{value:.4f}"


def _cutoff(spec: str, text: str, whole: bool = False) -> int:
    """A cutoff as trec_eval reads one (23.4 -> 23); whole: as ir_measures and ranx do, a whole number."""
    try:
        k = float(text)
    except ValueError:
        raise MeasureError(f"measure {spec!r}: cutoff {text!r} is not a number") from None
    if whole and k != int(k):
        raise MeasureError(f"measure {spec!r}: cutoff {text!r} is not a whole number of units")
    if k <= 0:
        raise MeasureError(f"measure {spec!r}: cutoffs must be positive")
    return int(k)      # trec_eval truncates fractional cutoffs (23.4 -> 23)


def _known() -> str:
    trec = sorted(f.name + ("_k" if f.cutoff == "required" else "_x" if f.cutoff == "recall" else "")
                  for f in FAMILIES.values())
    return (", ".join(trec) + "; or ir_measures style: nDCG@10, P(rel=2)@5, RecallAll@10, Judged@10, RR, "
            "RBP(p=0.9), SetF(beta=0.5); or ranx style: ndcg@10, map@100, mrr, precision@5, recall@10, hit_rate@5, "
            "hits@5, rbp.95, ndcg@10-l2")


def _spellings(k: str | None) -> list[str]:
    """Every spelling the parser accepts, with the cutoff the user wrote (k) where a family needs one:
    what 'did you mean' picks from (each parses: a test checks)."""
    out = []
    for f in FAMILIES.values():
        if f.cutoff in ("none", "optional") and k is None:
            out += [f.name, f.pretty]
        if f.cutoff in ("required", "optional") and k is not None and k.isdigit() and int(k) > 0:
            out += [f"{f.name}_{k}", f"{f.pretty}@{k}"]
    takes_k = {alias for alias, target in IR_ALIASES.items() if (target, True) in _BY_PRETTY}
    bare = {alias for alias, target in IR_ALIASES.items() if (target, False) in _BY_PRETTY}
    if k is None:
        out += list(RANX) + sorted(bare)
    elif k.isdigit() and int(k) > 0:
        out += [f"{b}@{k}" for b in RANX_CUT] + [f"{a}@{k}" for a in sorted(takes_k)]
    return list(dict.fromkeys(out))


def _family_words(base: str) -> set[str]:
    """The families a base name (any dialect, any case) can mean: empty when it names none."""
    got = set()
    for f in FAMILIES.values():
        if base in (f.name, f.pretty) or base.lower() in (f.name.lower(), f.pretty.lower()):
            got.add(f.name)
    for table in (RANX, RANX_CUT):
        if base in table:
            got.add(table[base])
    if base in IR_ALIASES:
        got |= _family_words(IR_ALIASES[base])
    return got


def _did_you_mean(name: str) -> str:
    """Close spellings that parse; for a known measure named wrongly (a cutoff it cannot take, one it
    needs), what is wrong with it instead of another measure's name."""
    k = None
    km = re.match(r"^.*?[@_.](?P<k>\d+)$", name)
    if km:
        k = km.group("k")
    spellings = _spellings(k)
    if name.startswith("rbp@"):
        return "; ranx writes RBP's persistence after a dot (rbp.95 is p = 0.95), and its rbp takes no cutoff"
    same = [s for s in spellings if s.lower() == name.lower()]
    if same:            # Map, mAP, NDCG_CUT_10: a measure's name in another case
        return f"; did you mean {' or '.join(same[:2])}? (measure names are case-sensitive)"
    m = re.match(r"^(?P<base>[A-Za-z][A-Za-z0-9_\-]*?)(?:[@_.(](?P<rest>.*))?$", name)
    base, rest = (m.group("base"), m.group("rest")) if m else (name, None)
    if base == "hits" and rest is None:
        return ("; hits needs a cutoff here: ranx's hits without one counts the relevant units of the whole ranking "
                "— write hits@N with N the ranking's depth (trec_eval's num_rel_ret is that count, summed over "
                "queries rather than averaged)")
    families = _family_words(base)
    if families:
        fams = [FAMILIES[f] for f in sorted(families)]
        takes = {f.cutoff for f in fams}
        if rest is None and takes <= {"required"}:
            return f"; {base} needs a cutoff, e.g. {base}@10 or {fams[0].name}_10"
        if rest is not None and takes <= {"none"}:
            return f"; {base} takes no cutoff (it is computed over the whole ranking)"
        return ""
    # typos only: a name that adds a word to a measure's (alpha_nDCG, NRBP, StRecall) is another measure
    close = registry.close_names(name, spellings, most=3)
    close = list({c.lower(): c for c in reversed(close)}.values())[::-1]       # one of precision@5 / Precision@5
    close.sort(key=lambda c: c[:1] != name[:1])          # a spelling that starts as the name did comes first
    return f"; did you mean {' or '.join(close)}?" if close else ""


# trec_eval measures that take a parameter list of their own (not a list of cutoffs)
GAIN_FAMILIES = ("ndcg", "G", "ndcg_rel", "Rndcg")
PARAMETRISED = ("utility", "11pt_avg", *GAIN_FAMILIES, "rbp", "rbp_resid", "set_F", "relstring")
_PARAMS_RE = re.compile(r"^(?P<base>utility|11pt_avg|ndcg|G|ndcg_rel|Rndcg|rbp|rbp_resid|set_F)_(?P<text>[^_].*)$")


def _number(spec: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise MeasureError(f"measure {spec!r}: {text!r} is not a number") from None


def _printed_params(name: str):
    """The match when name is a parametrised measure as trec_eval prints it (ndcg_1=3,2=9,
    utility_2,-1,0,0, 11pt_avg_.25,.5, rbp_p=0.95, set_F_0.5), else None (ndcg_cut_10 is not one)."""
    m = _PARAMS_RE.match(name)
    if not m:
        return None
    base, text = m.group("base"), m.group("text")
    if base in GAIN_FAMILIES or base in ("rbp", "rbp_resid"):
        ok = "=" in text
    else:
        ok = re.fullmatch(r"[-+0-9.,eE]+", text) is not None
    return m if ok else None


def _with_params(spec: str, base: str, text: str) -> Measure:
    """utility.p1,p2,p3,p4 | 11pt_avg.x1,x2,... | ndcg.level=gain,... (and G, ndcg_rel, Rndcg) |
    rbp.p=0.95 | set_F.x | relstring.N (trec_eval's forms)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if base == "relstring":
        if len(parts) != 1 or not parts[0].isdigit() or int(parts[0]) < 1:
            raise MeasureError(f"measure {spec!r}: relstring takes one whole number of units, e.g. relstring.20")
        return Measure("relstring", k=int(parts[0]))
    if base == "set_F":
        if len(parts) != 1:
            raise MeasureError(f"measure {spec!r}: set_F takes one number, the weight of recall (default 1)")
        x = _number(spec, parts[0])
        if x < 0:
            raise MeasureError(f"measure {spec!r}: set_F's weight must be 0 or more")
        return Measure("set_F", opts=(("beta", x),), param_text=text, params=(x,))
    if base in ("rbp", "rbp_resid"):
        p = None
        for part in parts:
            key, eq, value = part.partition("=")
            if key.strip() != "p" or not eq:
                raise MeasureError(f"measure {spec!r}: {base} takes p=<persistence>, e.g. {base}.p=0.95; got {part!r}")
            p = _number(spec, value)
        if p is None or not 0 < p < 1:
            raise MeasureError(f"measure {spec!r}: the persistence p must lie between 0 and 1")
        return Measure(base, opts=(("p", p),), params=(("p", p),), param_text=text)
    if base == "utility":
        if len(parts) != 4:
            raise MeasureError(f"measure {spec!r}: utility takes four coefficients (relevant retrieved, "
                               f"non-relevant retrieved, relevant not retrieved, non-relevant not retrieved), "
                               f"got {len(parts)}")
        params: tuple = tuple(_number(spec, p) for p in parts)
    elif base == "11pt_avg":
        params = tuple(_number(spec, p) for p in parts)
        if not params or any(not 0 <= x <= 1 for x in params):
            raise MeasureError(f"measure {spec!r}: 11pt_avg takes recall points between 0 and 1")
    else:
        pairs = []
        for p in parts:
            level, eq, gain = p.partition("=")
            if not eq or not level.strip().lstrip("-").isdigit():
                raise MeasureError(f"measure {spec!r}: {base} takes level=gain pairs, e.g. {base}.1=3,2=9; got {p!r}")
            pairs.append((int(level), _number(spec, gain)))
        if len({lv for lv, _ in pairs}) != len(pairs):
            raise MeasureError(f"measure {spec!r}: a relevance level is given two gains")
        params = tuple(pairs)
    return Measure(base, params=params, param_text=text)          # printed as trec_eval does: utility_2,-1,0,0


def _value(spec: str, text: str):
    """One keyword value of ir_measures' printed form: a number, True / False, or a quoted string."""
    text = text.strip()
    if text in ("True", "False", "true", "false"):
        return text.lower() == "true"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise MeasureError(f"measure {spec!r}: {text!r} is not a number, True / False or a quoted string") from None


def _split_args(args: str) -> list[str]:
    """key=value parts split at the commas outside braces (nDCG(gains={0:1,1:4}) keeps its map whole)."""
    parts, depth, current = [], 0, ""
    for ch in args:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p for p in [*parts, current] if p.strip()]


def _gain_map(spec: str, text: str) -> tuple:
    """ir_measures' gains={level: gain, ...} as trec_eval's level=gain pairs."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise MeasureError(f"measure {spec!r}: gains is a map {{level: gain, ...}}, got {text!r}")
    pairs = []
    for item in (i for i in body[1:-1].split(",") if i.strip()):
        level, colon, gain = item.partition(":")
        if not colon or not level.strip().lstrip("-").isdigit():
            raise MeasureError(f"measure {spec!r}: gains takes level: gain pairs, got {item.strip()!r}")
        pairs.append((int(level), _number(spec, gain.strip())))
    return tuple(pairs)


def _keywords(spec: str, args: str) -> dict:
    out = {}
    for part in _split_args(args):
        key, eq, value = part.partition("=")
        if not eq or not key.strip().isidentifier():
            raise MeasureError(f"measure {spec!r}: {part.strip()!r} is not key=value")
        out[key.strip()] = _gain_map(spec, value) if key.strip() == "gains" else _value(spec, value)
    return out


# what each ir_measures keyword may be given to (and what it means there)
_KEYWORD_HELP = {"rel": "a binary measure's relevance level", "gains": "nDCG's gain per level, {level: gain}", "p": "RBP's or Compat's persistence",
                 "beta": "SetF's weight of recall", "relative": "SetP(relative=True), trec_eval's set_relative_P",
                 "dcg": "nDCG's gain: 'log2' (linear) or 'exp-log2' (2^grade - 1)", "normalize": "Compat",
                 "judged_only": "as trec_eval -J: unjudged units are removed from the ranking first"}


def _ir_measure(name: str, base: str, args: dict, k_text: str | None) -> Measure | None:
    """A measure in ir_measures' printed form, or None when base is not one of its names."""
    base = IR_ALIASES.get(base, base)
    has_k = k_text is not None
    fam = _BY_PRETTY.get((base, has_k))
    if base == "NumRet" and "rel" in args:          # ir_measures: NumRet(rel=r) counts retrieved units at r
        fam = FAMILIES["num_rel_ret"]
    if base == "SetP" and args.get("relative") is True:
        fam = FAMILIES["set_relative_P"]
    if base == "nDCG" and args.get("dcg") == "exp-log2":
        fam = FAMILIES["ndcg_exp_cut" if has_k else "ndcg_exp"]
    if fam is None:
        return None
    rel = args.pop("rel", None)
    opts: dict = {}
    gains: tuple = ()
    for key, value in args.items():
        if key == "p" and fam.name in ("rbp", "compat"):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise MeasureError(f"measure {name!r}: p must be a number between 0 and 1")
            opts["p"] = float(value)
        elif key == "beta" and fam.name == "set_F":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise MeasureError(f"measure {name!r}: beta must be a number, 0 or more")
            opts["beta"] = float(value)
        elif key == "normalize" and fam.name == "compat":
            opts["normalize"] = bool(value)
        elif key == "relative" and fam.name in ("set_P", "set_relative_P"):
            if value not in (True, False):
                raise MeasureError(f"measure {name!r}: relative is True or False")
        elif key == "dcg" and fam.name in ("ndcg", "ndcg_cut", "ndcg_exp", "ndcg_exp_cut"):
            if value not in ("log2", "exp-log2"):
                raise MeasureError(f"measure {name!r}: dcg is 'log2' or 'exp-log2' (ir_measures' choices), got {value!r}")
        elif key == "judged_only":
            if value is True:
                opts["judged_only"] = True
        elif key == "gains" and fam.name == "ndcg":
            gains = value
        else:
            what = _KEYWORD_HELP.get(key)
            raise MeasureError(f"measure {name!r}: {fam.pretty} takes no {key}="
                               + (f" ({key} is {what})" if what else f" (it takes: {', '.join(sorted(_KEYWORD_HELP))})"))
    if fam.name == "rbp":            # ir_measures' RBP: persistence 0.8, binary relevance at rel (or the run's level)
        opts = {"p": 0.8, "gain": "binary", **opts}
    if fam.name == "compat":
        opts = {"p": 0.95, "normalize": True, **opts}
    if fam.name == "judged":         # ir_measures counts a -1 label as judged (in the qrels), trec_eval does not
        opts["rule"] = "in-qrels"
    if rel is not None:
        if isinstance(rel, bool) or not isinstance(rel, int):
            raise MeasureError(f"measure {name!r}: rel must be a whole number")
        if fam.needs not in ("binary",) and fam.name != "num_rel_ret":
            raise MeasureError(f"measure {name!r}: (rel=...) applies to binary measures only")
    if fam.cutoff == "recall":
        return Measure(fam.name, x=_number(name, k_text), rel=rel, spelled=name, opts=tuple(sorted(opts.items())))
    k = _cutoff(name, k_text, whole=True) if has_k else None
    if gains:                       # trec_eval's ndcg.level=gain: the same measure, the same numbers
        return Measure(fam.name, params=gains, param_text=",".join(f"{lv}={g:g}" for lv, g in gains), spelled=name,
                       opts=tuple(sorted(opts.items())))
    return Measure(fam.name, k=k, rel=rel, spelled=name, opts=tuple(sorted(opts.items())))


def _ranx_measure(name: str, base: str, k_text: str | None, rel: int | None) -> Measure | None:
    opts: tuple = ()
    if base.startswith("rbp.") and base[4:].isdigit():          # ranx's rbp.95: persistence 0.95, raw grades
        fam_name, opts, k_text_ok = "rbp", (("gain", "raw"), ("p", float("0." + base[4:]))), k_text is None
        if not k_text_ok:
            return None
    elif k_text is None and base in RANX:
        fam_name = RANX[base]
    elif k_text is not None and base in RANX_CUT:
        fam_name = RANX_CUT[base]
    else:
        return None
    fam = FAMILIES[fam_name]
    if rel is not None and (fam.needs != "binary" or fam_name == "rbp"):
        # ranx's rel_lvl on a graded measure: judgements below the level count as not relevant (gain 0)
        opts = tuple(sorted((*opts, ("min_rel", rel))))
        rel = None
    k = _cutoff(name, k_text, whole=True) if k_text is not None else None
    return Measure(fam_name, k=k, rel=rel, spelled=name, opts=opts)


def first_parameters(specs: Sequence[str]) -> tuple[list[str], list[str]]:
    """trec_eval's rule for a measure given parameters twice (-m P.5 -m P.10): the first parameters stand
    and later ones are ignored (it prints P_5 only). Returns the specs kept and a sentence for each one
    dropped. Only trec_eval's own spelling (name.parameters) repeats this way; other spellings are kept."""
    kept, dropped, first = [], [], {}
    for spec in specs:
        base, dot, text = str(spec).strip().partition(".")
        if dot and text and base in FAMILIES and " " not in spec:
            if base in first:
                dropped.append(f"-m {spec}: trec_eval keeps the first parameters given for {base} ({first[base]}) "
                               f"and ignores later ones, and so does lookalike; give them in one -m "
                               f"({base}.{first[base].partition('.')[2]},{text}) for both")
                continue
            first[base] = str(spec).strip()
        kept.append(spec)
    return kept, dropped


def parse_one(name: str) -> Measure:
    """One measure name in any dialect's spelling, or a trec_eval measure with its own parameters
    (utility.2,-1,0,0; 11pt_avg..25,.5; ndcg.1=3,2=9; rbp.p=0.95; set_F.0.5; relstring.20);
    cutoff lists are ``parse``'s."""
    name = name.strip()
    if not name:
        raise MeasureError("an empty measure name")
    base, dot, text = name.partition(".")
    if dot and base in PARAMETRISED and text and not (base == "rbp" and re.fullmatch(r"\d+(-l\d+)?", text)):
        return _with_params(name, base, text)
    m = _printed_params(name)            # the printed form read back: utility_2,-1,0,0 / ndcg_1=3,2=9
    if m:
        return _with_params(name, m.group("base"), m.group("text"))
    if name in FAMILIES and FAMILIES[name].cutoff in ("none", "optional"):
        return Measure(name, spelled=name)
    m = _IPREC_RE.match(name)
    if m:
        return Measure(m.group("base"), x=float(m.group("x")), spelled=name)
    m = _TREC_RE.match(name)
    if m and m.group("base") in FAMILIES and FAMILIES[m.group("base")].cutoff in ("required", "optional"):
        k = int(m.group("k"))
        if k <= 0:
            raise MeasureError(f"measure {name!r}: cutoffs must be positive")
        return Measure(m.group("base"), k=k, spelled=name)
    m = _IR_RE.match(name)
    if m:
        args = _keywords(name, m.group("args")) if m.group("args") is not None else {}
        got = _ir_measure(name, m.group("base"), args, m.group("k"))
        if got is not None:
            return got
    level = re.match(r"^(?P<rest>.+)-l(?P<rel>\d+)$", name)          # ranx's relevance level suffix
    ranx_name, rel = (level.group("rest"), int(level.group("rel"))) if level else (name, None)
    m = re.match(r"^(?P<base>rbp\.\d+)$", ranx_name) or _RANX_RE.match(ranx_name)
    if m:
        got = _ranx_measure(name, m.group("base"), m.groupdict().get("k"), rel)
        if got is not None:
            return got
    hint = _did_you_mean(name)
    raise MeasureError(f"unknown measure {name!r}{hint}" if hint else f"unknown measure {name!r} (known: {_known()})")


def _expand(spec: str, replaced: set[str] | None = None) -> list[str]:
    """A spec as names: ir_measures' space-separated lists, trec_eval's groups (official, all_trec,
    set), a bare family with trec_eval's default cutoffs (P, recall, ndcg_cut), and cutoff or
    recall-point lists (P.5,10). replaced: families given their own parameters elsewhere on the command
    line, which trec_eval prints instead of their defaults inside all_trec."""
    replaced = replaced or set()
    if len(spec.split()) > 1:            # ir_measures' space-separated list: 'nDCG@10 P@5 RR'
        return [name for part in spec.split() for name in _expand(part, replaced)]
    if spec in ("official", "trec"):
        return [n for n in TREC_DEFAULT if _family_of(n) not in replaced]
    if spec == "all_trec":
        return [n for n in ALL_TREC if _family_of(n) not in replaced]
    if spec in GROUPS:
        return list(GROUPS[spec])
    if spec in DEFAULT_CUTOFFS:
        return [f"{spec}_{k}" for k in DEFAULT_CUTOFFS[spec]]
    if spec in DEFAULT_POINTS:
        return [f"{spec}_{x:.2f}" for x in DEFAULT_POINTS[spec]]
    if ("." in spec and "@" not in spec and "(" not in spec and not _IPREC_RE.match(spec)
            and not _printed_params(spec) and not re.match(r"^rbp\.\d+(-l\d+)?$", spec)):
        base, _, params = spec.partition(".")
        if base in PARAMETRISED:
            return [spec]
        # trec_eval evaluates a cutoff list in increasing order, whatever order it was given in
        values = sorted({_number(spec, p.strip()) for p in params.split(",") if p.strip()})
        if base in FAMILIES and FAMILIES[base].cutoff == "recall":
            return [f"{base}_{x:.2f}" for x in values]
        return list(dict.fromkeys(f"{base}_{_cutoff(spec, repr(x))}" for x in values))
    return [spec]


def _family_of(name: str) -> str:
    """The trec_eval family of a trec_eval-spelled name (P_5 -> P, iprec_at_recall_0.10 -> iprec_at_recall)."""
    m = _IPREC_RE.match(name) or _TREC_RE.match(name)
    return m.group("base") if m else name


def trec_order(measures: list[Measure]) -> list[Measure]:
    """Measures spelled as trec_eval spells them in trec_eval's measure-table order (the order of
    its output lines whatever the command line said; cutoffs as given), then any spelled in another
    dialect, in the order asked."""
    trec = [m for m in measures if m.family in TREC_ORDER and str(m) == m.trec_name and m.rel is None
            and not (set(dict(m.opts)) - {"p", "beta"})]
    rest = [m for m in measures if m not in trec]
    trec.sort(key=lambda m: TREC_ORDER.index(m.family))      # stable: each family keeps its own order
    return trec + rest


def parse(specs: Iterable[str | Measure]) -> list[Measure]:
    """Measures from names and trec_eval-style specs, in order, without repeats (a measure asked
    for in both spellings is kept once, in its first spelling). As in trec_eval, a family given its
    own cutoffs or parameters (-m P.5, -m relstring.20) replaces that family's defaults inside
    all_trec / official."""
    specs = list(specs)
    replaced = set()
    texts = [str(s).strip() for s in specs if not isinstance(s, Measure)]
    if any(t in ("all_trec", "official", "trec") for t in texts):
        for t in texts:
            base, dot, rest = t.partition(".")
            if dot and rest and "@" not in t and "(" not in t and base in FAMILIES:
                replaced.add(base)
    out: list[Measure] = []
    for spec in specs:
        items = [spec] if isinstance(spec, Measure) else [parse_one(n) for n in _expand(str(spec).strip(), replaced)]
        for m in items:
            if m not in out:
                out.append(m)
    return out
