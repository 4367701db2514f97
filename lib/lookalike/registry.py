"""One registry shape for every pluggable thing lookalike names in parameters: a Registry holds
specs (frozen dataclasses with a ``name``) and answers an unknown name with the known ones and a
"did you mean"."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import TypeVar

T = TypeVar("T")


class UnknownName(KeyError, ValueError):
    """A name no spec is registered under: a KeyError to a mapping's readers, a ValueError to whoever
    checks a parameter; its text is the sentence, not KeyError's quoted repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T]):
    """name -> spec, in registration order, read like a mapping (iterating gives the names, ``values()``
    the specs). ``what`` names the kind of thing in errors; the parameter schema's allowed values for a
    key that names one of these things are checked against ``names()`` (tests/retrieval/test_registries.py)."""

    def __init__(self, what: str):
        self.what = what
        self._specs: dict[str, T] = {}

    def register(self, spec: T) -> T:
        name = spec.name  # type: ignore[attr-defined]
        if name in self._specs:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._specs[name] = spec
        return spec

    def __getitem__(self, name: str) -> T:
        if name not in self._specs:
            close = difflib.get_close_matches(name, list(self._specs), n=2)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UnknownName(f"unknown {self.what} {name!r}{hint} (known: {', '.join(self._specs)})")
        return self._specs[name]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        return list(self._specs)
