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
from collections.abc import Iterable

# aggregation over queries: mean (trec_eval's 'all' line), sum (counts), gmean (gm_map), count (num_q)
AGGREGATIONS = ("mean", "sum", "gmean", "count")
# what a measure reads from the judgements: binary relevance at a level, graded gains, the
# three-way labels, or only whether a unit carries a judgement
NEEDS = ("binary", "graded", "three-way", "judged", "none")


class MeasureError(ValueError):
    """An unknown measure name or malformed cutoff."""


@dataclass(frozen=True)
class Family:
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
    Family("judged", "Judged", "required", needs="judged", doc="share of the top min(k, num_ret) that is judged"),
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
    Family("rbp", "RBP", "none", doc="rank-biased precision, persistence 0.9 (trec_eval's default)"),
    Family("rbp_resid", "RBPResid", "none", needs="judged",
           doc="what the unjudged units (and the ranking's tail) could still add to rbp"),
    Family("unj", "Unjudged", "required", needs="judged", doc="share of the top k that is unjudged (k as denominator)"),
)}
# ranx's names (lower case; "@k" for a cutoff) for the families they compute the same way:
# without a cutoff, and with one
RANX = {"ndcg": "ndcg", "ndcg_burges": "ndcg_exp", "map": "map", "mrr": "recip_rank", "r-precision": "Rprec",
        "bpref": "bpref"}
RANX_CUT = {"ndcg": "ndcg_cut", "ndcg_burges": "ndcg_exp_cut", "map": "map_cut", "precision": "P", "recall": "recall",
            "hit_rate": "success"}
_RANX_RE = re.compile(r"^(?P<base>[a-z][a-z_\-]*)(?:@(?P<k>\d+))?$")
_BY_PRETTY = {}
for _f in FAMILIES.values():
    # nDCG@k and nDCG name two families (cutoff and none); the cutoff decides which
    _BY_PRETTY.setdefault((_f.pretty, _f.cutoff != "none"), _f)
TREC_DEFAULT = ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                *[f"iprec_at_recall_{x / 10:.2f}" for x in range(11)],
                "P_5", "P_10", "P_15", "P_20", "P_30", "P_100", "P_200", "P_500", "P_1000"]
_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
# trec_eval's all_trec set in the order it prints it (after runid); ALL_TREC_MISSING: the ones
# lookalike does not compute yet (named on stderr by lookalike eval, never silently left out)
ALL_TREC = ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
            *[f"iprec_at_recall_{x / 10:.2f}" for x in range(11)], *[f"P_{k}" for k in _CUTS],
            *[f"recall_{k}" for k in _CUTS], "infAP", "gm_bpref", *[f"Rprec_mult_{x / 10:.2f}" for x in range(2, 21, 2)],
            "utility", "11pt_avg", "binG", "G", "ndcg", "ndcg_rel", "Rndcg", *[f"ndcg_cut_{k}" for k in _CUTS],
            *[f"map_cut_{k}" for k in _CUTS], *[f"relative_P_{k}" for k in _CUTS], "success_1", "success_5",
            "success_10", "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret",
            "rbp", "rbp_resid", "unj_5", "unj_10", "unj_20"]
ALL_TREC_MISSING = ["infAP", "binG", "G", "ndcg_rel", "Rndcg"]
_TREC_RE = re.compile(r"^(?P<base>[A-Za-z_]+?)_(?P<k>\d+)$")
_IPREC_RE = re.compile(r"^(?P<base>iprec_at_recall|Rprec_mult)_(?P<x>\d*\.?\d+)$")
_PRETTY_RE = re.compile(r"^(?P<base>[A-Za-z0-9]+?)(?:\(rel=(?P<rel>\d+)\))?(?:@(?P<k>\d*\.?\d+))?$")


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

    @property
    def info(self) -> Family:
        return FAMILIES[self.family]

    @property
    def aggregation(self) -> str:
        return self.info.aggregation

    @property
    def needs(self) -> str:
        return self.info.needs

    @property
    def integer(self) -> bool:
        return self.info.integer

    @property
    def trec_name(self) -> str:
        """trec_eval's spelling (P_5, ndcg_cut_10, iprec_at_recall_0.50); a level of its own is
        written as ir_measures does, since trec_eval has no per-measure level."""
        if self.rel is not None:
            return self.pretty_name
        if self.params:
            return f"{self.family}_{self.param_text}"
        if self.k is not None:
            return f"{self.family}_{self.k}"
        if self.x is not None:
            return f"{self.family}_{self.x:.2f}"
        return self.family

    @property
    def pretty_name(self) -> str:
        """ir_measures' spelling: nDCG@10, P(rel=2)@5, RecallAll@10, RR."""
        base = self.info.pretty + (f"(rel={self.rel})" if self.rel is not None else "")
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


def _cutoff(spec: str, text: str) -> int:
    try:
        k = float(text)
    except ValueError:
        raise MeasureError(f"measure {spec!r}: cutoff {text!r} is not a number") from None
    if k <= 0:
        raise MeasureError(f"measure {spec!r}: cutoffs must be positive")
    return int(k)      # trec_eval truncates fractional cutoffs (23.4 -> 23)


def _known() -> str:
    trec = sorted(f.name + ("_k" if f.cutoff == "required" else "_x" if f.cutoff == "recall" else "")
                  for f in FAMILIES.values())
    return (", ".join(trec) + "; or ir_measures style: nDCG@10, P(rel=2)@5, RecallAll@10, Judged@10, RR; "
            "or ranx style: ndcg@10, map@100, mrr, precision@5, recall@10, hit_rate@5")


def _spellings(k: str | None) -> list[str]:
    """Every spelling the parser accepts, with the cutoff the user wrote (k) where a family needs one:
    what 'did you mean' picks from."""
    out = []
    for f in FAMILIES.values():
        if f.cutoff == "none" and k is None:
            out += [f.name, f.pretty]
        elif f.cutoff != "none" and k is not None:
            out += [f"{f.name}_{k}", f"{f.pretty}@{k}"]
    out += list(RANX) if k is None else [f"{b}@{k}" for b in RANX_CUT]
    return list(dict.fromkeys(out))


def _did_you_mean(name: str) -> str:
    import difflib

    m = re.match(r"^(?P<base>.*?)(?:[@_.](?P<k>\d*\.?\d+))?$", name)
    spellings = _spellings(m.group("k") if m else None)
    close = difflib.get_close_matches(name, spellings, n=3, cutoff=0.6)
    if not close:
        lowered = {s.lower(): s for s in spellings}
        close = [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)]
    return f"; did you mean {' or '.join(close)}?" if close else ""


# trec_eval measures that take a parameter list of their own (not a list of cutoffs)
PARAMETRISED = ("utility", "11pt_avg", "ndcg")
_PARAMS_RE = re.compile(r"^(?P<base>utility|11pt_avg|ndcg)_(?P<text>[^_].*)$")


def _number(spec: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise MeasureError(f"measure {spec!r}: {text!r} is not a number") from None


def _printed_params(name: str):
    """The match when name is a parametrised measure as trec_eval prints it (ndcg_1=3,2=9,
    utility_2,-1,0,0, 11pt_avg_.25,.5), else None (ndcg_cut_10 is not one)."""
    m = _PARAMS_RE.match(name)
    if not m:
        return None
    base, text = m.group("base"), m.group("text")
    ok = "=" in text if base == "ndcg" else re.fullmatch(r"[-+0-9.,eE]+", text) is not None
    return m if ok else None


def _with_params(spec: str, base: str, text: str) -> Measure:
    """utility.p1,p2,p3,p4 | 11pt_avg.x1,x2,... | ndcg.level=gain,... (trec_eval's forms)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
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
                raise MeasureError(f"measure {spec!r}: ndcg takes level=gain pairs, e.g. ndcg.1=3,2=9; got {p!r}")
            pairs.append((int(level), _number(spec, gain)))
        if len({lv for lv, _ in pairs}) != len(pairs):
            raise MeasureError(f"measure {spec!r}: a relevance level is given two gains")
        params = tuple(pairs)
    return Measure(base, params=params, param_text=text)          # printed as trec_eval does: utility_2,-1,0,0


def parse_one(name: str) -> Measure:
    """One measure name in either spelling, or a trec_eval measure with its own parameters
    (utility.2,-1,0,0; 11pt_avg..25,.5; ndcg.1=3,2=9); cutoff lists are ``parse``'s."""
    name = name.strip()
    base, dot, text = name.partition(".")
    if dot and base in PARAMETRISED and text:
        return _with_params(name, base, text)
    m = _printed_params(name)            # the printed form read back: utility_2,-1,0,0 / ndcg_1=3,2=9
    if m:
        return _with_params(name, m.group("base"), m.group("text"))
    if name in FAMILIES and FAMILIES[name].cutoff == "none":
        return Measure(name, spelled=name)
    m = _IPREC_RE.match(name)
    if m:
        return Measure(m.group("base"), x=float(m.group("x")), spelled=name)
    m = _TREC_RE.match(name)
    if m and m.group("base") in FAMILIES and FAMILIES[m.group("base")].cutoff == "required":
        k = int(m.group("k"))
        if k <= 0:
            raise MeasureError(f"measure {name!r}: cutoffs must be positive")
        return Measure(m.group("base"), k=k, spelled=name)
    m = _PRETTY_RE.match(name)
    if m:
        has_k = m.group("k") is not None
        fam = _BY_PRETTY.get((m.group("base"), has_k))
        if fam is not None:
            rel = int(m.group("rel")) if m.group("rel") is not None else None
            if rel is not None and fam.needs != "binary":
                raise MeasureError(f"measure {name!r}: (rel=...) applies to binary measures only")
            if fam.cutoff == "recall":
                return Measure(fam.name, x=float(m.group("k")), rel=rel, spelled=name)
            return Measure(fam.name, k=_cutoff(name, m.group("k")) if has_k else None, rel=rel, spelled=name)
    m = _RANX_RE.match(name)
    if m:
        base, k = m.group("base"), m.group("k")
        if k is None and base in RANX:
            return Measure(RANX[base], spelled=name)
        if k is not None and base in RANX_CUT:
            return Measure(RANX_CUT[base], k=_cutoff(name, k), spelled=name)
    hint = _did_you_mean(name)
    raise MeasureError(f"unknown measure {name!r}{hint}" if hint else f"unknown measure {name!r} (known: {_known()})")


def _expand(spec: str) -> list[str]:
    if len(spec.split()) > 1:            # ir_measures' space-separated list: 'nDCG@10 P@5 RR'
        return [name for part in spec.split() for name in _expand(part)]
    if spec in ("official", "trec"):
        return list(TREC_DEFAULT)
    if spec == "all_trec":
        return [name for name in ALL_TREC if name not in ALL_TREC_MISSING]
    if "." in spec and "@" not in spec and not _IPREC_RE.match(spec) and not _printed_params(spec):
        base, _, params = spec.partition(".")
        if base in PARAMETRISED:
            return [spec]
        # trec_eval evaluates a cutoff list in increasing order, whatever order it was given in
        values = sorted({_number(spec, p.strip()) for p in params.split(",") if p.strip()})
        if base in FAMILIES and FAMILIES[base].cutoff == "recall":
            return [f"{base}_{x:.2f}" for x in values]
        return list(dict.fromkeys(f"{base}_{_cutoff(spec, repr(x))}" for x in values))
    return [spec]


def parse(specs: Iterable[str | Measure]) -> list[Measure]:
    """Measures from names and trec_eval-style specs, in order, without repeats (a measure asked
    for in both spellings is kept once, in its first spelling)."""
    out: list[Measure] = []
    for spec in specs:
        items = [spec] if isinstance(spec, Measure) else [parse_one(n) for n in _expand(str(spec).strip())]
        for m in items:
            if m not in out:
                out.append(m)
    return out
