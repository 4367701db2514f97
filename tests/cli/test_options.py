"""Every command's numeric options, given what a user may type (0, negative, nan, inf, huge, words): a value
the option cannot mean is refused while the command line is read, naming the option (exit status 2); none
ends in a traceback or computes with it ("-7.2 person-hours", "nan person-hours", a division by zero)."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lookalike.cli import main, options

# (the command line before the value, the option, the run folder argument after it)
NUMERIC = [
    (["labels", "plan", "{run}", "--people", "2", "--labels-per-hour"], "--labels-per-hour", lambda v: v > 0),
    (["labels", "plan", "{run}", "--people"], "--people", lambda v: v >= 1 and v == int(v)),
    (["labels", "plan", "{run}", "--people", "2", "--per-pair"], "--per-pair", lambda v: v >= 1 and v == int(v)),
    (["labels", "serve", "{run}", "--port"], "--port", lambda v: 1 <= v <= 65535 and v == int(v)),
    (["labels", "serve", "{run}", "--per-pair"], "--per-pair", lambda v: v >= 1 and v == int(v)),
    (["eval", "{run}/q", "{run}/r", "-M"], "-M", lambda v: v >= 0 and v == int(v)),
    (["eval", "{run}/q", "{run}/r", "-N"], "-N", lambda v: v >= 0 and v == int(v)),
    (["eval", "{run}/q", "{run}/r", "--ci", "--n-boot"], "--n-boot", lambda v: v >= 1 and v == int(v)),
    (["eval", "{run}/q", "{run}/r", "--seed"], "--seed", lambda v: v >= 0 and v == int(v)),
    (["leak-check", "{run}/p.yaml", "--threshold"], "--threshold", lambda v: 0 <= v <= 1),
    (["example", "photos", "{run}/ex", "--seed"], "--seed", lambda v: v >= 0 and v == int(v)),
]
ODD = ["0", "-5", "-0.5", "nan", "NaN", "inf", "-inf", "1e309", str(10 ** 30), "", "abc", "1,5", "0x10"]


def _meaning(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@pytest.mark.parametrize("before, option, allowed", NUMERIC, ids=[f"{b[0]}-{b[1]}-{o}" for b, o, _ in NUMERIC])
def test_a_value_an_option_cannot_mean_is_refused_naming_it(before, option, allowed, tmp_path, capsys):
    for text in ODD:
        value = _meaning(text)
        if value is not None and math.isfinite(value) and allowed(value) and (value == int(value) or "." in text):
            continue                      # a value the option takes: not this test's business
        argv = [a.replace("{run}", str(tmp_path)) for a in before] + [text]
        try:
            code = main(argv)             # a command that checks the value itself says so and returns 2
        except SystemExit as stop:        # argparse refused it while reading the command line
            code = stop.code
        out = capsys.readouterr()
        said = out.out + out.err
        assert code == 2 and option in said and "Traceback" not in said, (argv, said)


def test_the_zero_and_nan_pace_no_longer_reach_the_plan(tmp_path, capsys):
    """The catalogue's cases: --labels-per-hour 0 divided by zero, -5 and nan printed "-7.2 person-hours" and
    "nan person-hours"."""
    for pace in ("0", "-5", "nan"):
        with pytest.raises(SystemExit) as stop:
            main(["labels", "plan", str(tmp_path), "--people", "2", "--labels-per-hour", pace])
        out = capsys.readouterr()
        assert stop.value.code == 2 and "person-hours" not in out.out
        assert "must be a finite number above 0" in out.err


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=8)))
def test_the_option_types_take_or_refuse_any_text_in_words(raw):
    text = str(raw)
    for parse in (options.whole(0), options.whole(1, 65535), options.number(above=0), options.number(low=0, high=1)):
        try:
            value = parse(text)
        except argparse.ArgumentTypeError as exc:
            assert "must be" in str(exc) and repr(text) in str(exc)
        else:
            assert math.isfinite(value)
