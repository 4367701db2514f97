"""One registry shape for every pluggable thing lookalike names in parameters: a Registry holds
specs (frozen dataclasses with a ``name``) and answers an unknown name with the known ones and a
"did you mean"."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """name -> spec, in registration order. ``what`` names the kind of thing in errors."""

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
            raise KeyError(f"unknown {self.what} {name!r}{hint} (known: {', '.join(self._specs)})")
        return self._specs[name]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[T]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        return list(self._specs)
