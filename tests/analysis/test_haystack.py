"""The haystack curve: nested subsamples, always-kept units, shared resamples, an extrapolation
that is flagged and only made when asked for."""

import numpy as np
import pandas as pd
import pytest

from lookalike.analysis import haystack
from lookalike.eval import stats


def test_subsamples_are_nested_seeded_and_in_corpus_order():
    units = [f"u{i:03d}" for i in range(200)]
    sizes = haystack.subsample_sizes(len(units))
    assert sizes == [20, 50, 100, 200]
    subs = haystack.nested_subsamples(units, sizes, seed=3)
    for small, big in zip(sizes, sizes[1:]):
        assert set(subs[small]) < set(subs[big])
    assert subs[200] == units and subs[20] == sorted(subs[20])
    assert subs == haystack.nested_subsamples(units, sizes, seed=3) and subs[20] != haystack.nested_subsamples(units, sizes, 4)[20]
    with pytest.raises(ValueError, match="report.haystack_fractions"):
        haystack.subsample_sizes(10, [0.0, 1.0])


def test_gold_and_hard_distractors_are_always_candidates():
    subs = {2: ["a", "b"], 4: ["a", "b", "c", "d"]}
    sets = haystack.candidate_sets({"q1": ["z", "c", "z"]}, subs)
    assert sets[2]["q1"] == ["a", "b", "z", "c"] and sets[4]["q1"] == ["a", "b", "c", "d", "z"]


def _falling(n=60, sizes=(10, 20, 40, 80), seed=0):
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    # a question is found at a size while its draw is under a threshold that falls with log size
    return pd.DataFrame({s: (base < 0.95 - 0.15 * np.log2(s / sizes[0])).astype(float) for s in sizes},
                        index=[f"q{i}" for i in range(n)])


def test_curve_measures_every_size_and_extrapolates_only_past_the_corpus():
    frame = _falling()
    same = haystack.curve({("sys", "recall_10"): frame}, target_size=80, seed=1)
    assert not same["extrapolated"].any() and list(same["corpus_size"]) == [10, 20, 40, 80]
    assert np.allclose(same["value"], frame.mean().to_numpy())
    assert (same["lo"] <= same["value"]).all() and (same["value"] <= same["hi"]).all()
    far = haystack.curve({("sys", "recall_10"): frame}, target_size=1000, seed=1)
    guess = far[far["extrapolated"]]
    assert len(guess) == 1 and guess["corpus_size"].iloc[0] == 1000
    assert guess["value"].iloc[0] < same["value"].iloc[-1]                 # the trend continues down
    assert guess["lo"].iloc[0] <= guess["value"].iloc[0] <= guess["hi"].iloc[0]
    assert guess["value"].iloc[0] == 0.0                                    # clipped: a share is never below 0
    # one doubling past the corpus the planted trend (0.95 - 0.15 per doubling) is found again
    near = haystack.curve({("sys", "recall_10"): _falling(n=400)}, target_size=160, seed=1)
    g = near[near["extrapolated"]].iloc[0]
    assert g["lo"] <= 0.35 <= g["hi"] and g["value"] == pytest.approx(0.35, abs=0.08)


def test_every_size_shares_one_set_of_resamples():
    # identical columns give identical intervals only if every size draws the same questions
    col = (np.arange(50) % 3 == 0).astype(float)
    frame = pd.DataFrame({10: col, 20: col, 40: col}, index=[f"q{i}" for i in range(50)])
    t = haystack.curve({("s", "top1"): frame}, seed=5)
    assert t["lo"].nunique() == 1 and t["hi"].nunique() == 1


def test_fit_line_recovers_a_line_in_log_size():
    logs = np.log(np.array([10.0, 100.0, 1000.0]))
    values = np.array([[0.9, 0.7, 0.5]])
    assert stats.fit_log_line(logs, values, np.log(10000.0))[0] == pytest.approx(0.3)


def test_the_summary_sentence_states_n_interval_and_what_it_rests_on():
    from lookalike.report.summary import haystack_sentence

    curve = haystack.curve({("sys", "recall_10"): _falling()}, target_size=500, seed=1)
    said = haystack_sentence(curve, 80, rests_on="the demo generator's evidence pages",
                             interval="bootstrap 95%, documents resampled")
    assert "n = 60 validated questions" in said and "evidence pages" in said and "documents resampled" in said
    assert "an extrapolation, not a measurement" in said


def test_adding_a_system_moves_no_other_systems_interval():
    """Before, each (system, measure) curve drew resamples seeded by its place in the sorted list, so
    removing one system (hybrid-rrf on a run without captions) moved the next systems' intervals."""
    rng = np.random.default_rng(0)
    frame = lambda: pd.DataFrame({10: rng.random(30), 20: rng.random(30)},  # noqa: E731
                                 index=[f"q{i}" for i in range(30)])
    a, b, c = frame(), frame(), frame()
    two = haystack.curve({("a", "top1"): a, ("c", "top1"): c}, n_boot=300, seed=4)
    three = haystack.curve({("a", "top1"): a, ("b", "top1"): b, ("c", "top1"): c}, n_boot=300, seed=4)
    pd.testing.assert_frame_equal(two.reset_index(drop=True),
                                  three[three["system"] != "b"].reset_index(drop=True))
