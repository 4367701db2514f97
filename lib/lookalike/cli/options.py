"""Argument types for the commands' numeric options: each refuses what its option cannot mean (zero people,
a negative pace, nan, infinity, a port outside 1–65535) while the command line is read, in argparse's own
words (``argument --labels-per-hour: must be a number above 0, got 'nan'``, exit status 2), so no command
computes with a value it would only turn into "nan person-hours" or a division by zero."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """A whole number within [low, high] (either bound may be open)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number{_range(low, high)}, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be a whole number{_range(low, high)}, got {text!r}")
        return value
    return parse


def number(above: float | None = None, low: float | None = None, high: float | None = None) -> Callable[[str], float]:
    """A finite number: above it strictly, or within [low, high]."""
    def parse(text: str) -> float:
        words = (f" above {above:g}" if above is not None else "") + _range(low, high)
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number{words}, got {text!r}") from None
        if (not math.isfinite(value) or (above is not None and value <= above) or (low is not None and value < low)
                or (high is not None and value > high)):
            raise argparse.ArgumentTypeError(f"must be a finite number{words}, got {text!r}")
        return value
    return parse


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f" from {low:g} to {high:g}"
    if low is not None:
        return f" of {low:g} or more"
    if high is not None:
        return f" of {high:g} or less"
    return ""
