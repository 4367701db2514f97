"""Agreement between two judges (judging.agreement): Cohen's kappa, its interval, and the words when it is undefined."""

from __future__ import annotations

import pytest
from lookalike.judging import judges
from lookalike.report.summary import kappa_words


def test_kappa_and_confusion():
    a = ["sufficient", "supporting", "irrelevant", "irrelevant", "sufficient", "supporting"]
    assert judges.cohen_kappa(a, a) == pytest.approx(1.0)
    b = ["sufficient", "sufficient", "irrelevant", "supporting", "sufficient", "supporting"]
    cm = judges.confusion(a, b)
    assert cm.loc["supporting", "sufficient"] == 1 and cm.to_numpy().sum() == 6
    po = 4 / 6
    pe = (2 * 3 + 2 * 2 + 2 * 1) / 36
    assert judges.cohen_kappa(a, b) == pytest.approx((po - pe) / (1 - pe))
    # boundary: only items both call relevant — (suff,suff), (supp,suff), (suff,suff), (supp,supp)
    assert judges.boundary_kappa(a, b) == pytest.approx(judges.cohen_kappa(
        ["sufficient", "supporting", "sufficient", "supporting"], ["sufficient", "sufficient", "sufficient", "supporting"],
        labels=("sufficient", "supporting")))


def test_kappa_ci_brackets_kappa_and_matches_the_slow_definition():
    import numpy as np
    rng = np.random.default_rng(0)
    labs = np.array(judges.LABELS, dtype=object)
    a = list(labs[rng.integers(0, 3, 300)])
    b = [x if rng.random() < 0.7 else labs[rng.integers(0, 3)] for x in a]
    lo, hi = judges.kappa_ci(a, b, n_boot=400, seed=1)
    k = judges.cohen_kappa(a, b)
    assert lo < k < hi and hi - lo < 0.25
    got = judges.agreement(a, b)
    assert (got["kappa_lo"], got["kappa_hi"]) == judges.kappa_ci(a, b) and got["kappa"] == k
    assert judges.kappa_ci(a[:1], b[:1]) != judges.kappa_ci(a[:1], b[:1])          # nan: undefined on one pair


def _kappa_ci_in_one_piece(a, b, n_boot=1000, seed=0, level=0.95):
    # the bootstrap as first written: every (replicate, pair) cell in one int64 array
    import numpy as np
    code = {lab: i for i, lab in enumerate(judges.LABELS)}
    x = np.asarray([code[v] for v in a], dtype=np.int64)
    y = np.asarray([code[v] for v in b], dtype=np.int64)
    n, m = len(x), len(judges.LABELS)
    idx = np.random.default_rng([seed, 77]).integers(0, n, size=(n_boot, n))
    cells = (x[idx] * m + y[idx]) + (np.arange(n_boot)[:, None] * m * m)
    cm = np.bincount(cells.ravel(), minlength=n_boot * m * m).reshape(n_boot, m, m).astype(float)
    po = np.trace(cm, axis1=1, axis2=2) / n
    pe = (cm.sum(axis=2) * cm.sum(axis=1)).sum(axis=1) / n ** 2
    one_label = ((cm.sum(axis=2) > 0).sum(axis=1) < 2) | ((cm.sum(axis=1) > 0).sum(axis=1) < 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas = np.where((pe < 1.0) & ~one_label, (po - pe) / (1 - pe), np.nan)
    values = kappas[~np.isnan(kappas)]
    if not len(values):
        return float("nan"), float("nan")
    lo, hi = np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


@pytest.mark.parametrize("n, slab", [(2, 1 << 20), (37, 100), (500, 1 << 20), (500, 1200), (2000, 1)])
def test_kappa_ci_in_slabs_gives_the_one_piece_bounds_bit_for_bit(monkeypatch, n, slab):
    # slabs of replicates (one replicate per slab, several with a remainder, or all in one): the
    # same draws, the same counts, the same bounds as the one-piece computation
    import numpy as np
    rng = np.random.default_rng(n)
    labs = np.array(judges.LABELS, dtype=object)
    a = list(labs[rng.integers(0, 3, n)])
    b = [x if rng.random() < 0.6 else labs[rng.integers(0, 3)] for x in a]
    from lookalike.judging import agreement

    monkeypatch.setattr(agreement, "KAPPA_SLAB", slab)
    assert judges.kappa_ci(a, b, n_boot=300, seed=3) == _kappa_ci_in_one_piece(a, b, n_boot=300, seed=3)


def test_kappa_is_undefined_when_one_judge_gives_one_label_and_the_raw_agreement_is_said():
    people = ["irrelevant"] * 6                                  # people's labels hold one value
    model = ["irrelevant", "sufficient", "irrelevant", "supporting", "irrelevant", "irrelevant"]
    row = judges.agreement(model, people)
    assert row["kappa"] != row["kappa"] and row["kappa_lo"] != row["kappa_lo"]   # was 0.00 [0.00, 0.00]
    words = kappa_words(row)
    assert words.startswith("kappa undefined") and "raw agreement 0.67 over 6 pairs" in words


def test_kappa_words_never_print_nan_and_read_csv_text():
    assert kappa_words({"kappa": 0.153, "kappa_lo": 0.11, "kappa_hi": 0.19}) == "kappa 0.15 [0.11, 0.19]"
    assert kappa_words({"kappa": "", "kappa_lo": "", "kappa_hi": ""}).startswith("kappa undefined")
    assert kappa_words({"kappa": "0.5", "kappa_lo": "0.4", "kappa_hi": "0.6"}) == "kappa 0.50 [0.40, 0.60]"
    assert "nan" not in kappa_words(judges.agreement(["sufficient"] * 3, ["sufficient"] * 3))


def test_the_pairs_both_judges_labelled_and_the_words_for_the_rest():
    from lookalike.judging.agreement import labelled_by_both

    both, said = labelled_by_both(["sufficient", "abstain", "irrelevant"], ["abstain", "abstain", "supporting"],
                                  "first", "second")
    assert both.tolist() == [False, False, True]
    assert said == "2 of 3 pairs left out of the agreement: 2 the second judge abstained on, 1 the first judge did"
    assert labelled_by_both(["sufficient"], ["irrelevant"], "a", "b")[1] == ""
