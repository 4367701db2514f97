"""One registry shape for every pluggable thing lookalike names in parameters: a Registry holds
specs (frozen dataclasses with a ``name``) and answers an unknown name with the known ones and a
"did you mean".

The parameter check reads a registry's names at check time (``named``), so a key that names a judge
allows every judge registered then — the built-ins and a plug-in's — without importing the layers
above: each registry kind has a home module (HOMES) whose import registers its built-ins. Plug-ins
are named by import path: "package.module:Class" or "path/to/file.py:Class"; ``load_plugin`` is the one
loader every kind uses (encoders, judges, corpus sources), with one set of refusals. Naming a plug-in
runs its module's code when the run is checked, as importing any module does.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def edit_distance(a: str, b: str) -> int:
    """Edits from a to b: insertions, deletions, substitutions and swaps of two neighbours (nDGC for nDCG),
    each 1 (the optimal string alignment distance)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def close_names(name: str, known: Iterable[str], most: int = 2) -> list[str]:
    """The known names a misspelling of name could mean, nearest first: equal but for case, or within an edit
    distance of 2 (1 for names of 7 characters or fewer), never a known name that name merely extends with
    letters of its own (alpha_nDCG is another measure than nDCG, NRBP than RBP: a word added is a new name,
    not a typo)."""
    low = name.lower()
    scored = []
    for k in dict.fromkeys(known):
        kl = k.lower()
        d = edit_distance(low, kl)
        if kl == low:
            scored.append((0, k))
        elif d <= (1 if len(kl) <= 7 else 2) and not (kl in low and len(kl) < len(low)):
            scored.append((d, k))
    return [k for _, k in sorted(scored, key=lambda t: t[0])][:most]


class UnknownName(KeyError, ValueError):
    """A name no spec is registered under: a KeyError to a mapping's readers, a ValueError to whoever
    checks a parameter; its text is the sentence, not KeyError's quoted repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T]):
    """name -> spec, in registration order, read like a mapping (iterating gives the names, ``values()``
    the specs). ``what`` names the kind of thing in errors; the parameter schema's allowed values for a
    key that names one of these things are checked against ``names()`` (tests/test_registry.py)."""

    def __init__(self, what: str):
        self.what = what
        self._specs: dict[str, T] = {}
        # plugin(spec, bases) -> name: enters a plug-in named by import path, for the kinds that take one
        self.plugin: Callable[[str, Sequence[Path]], str] | None = None
        _ALL[what] = self

    def register(self, spec: T) -> T:
        """Enter spec under its name (spec.name); a name registered twice is refused."""
        name = spec.name  # type: ignore[attr-defined]
        if name in self._specs:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._specs[name] = spec
        return spec

    def replace(self, spec: T) -> T:
        """Enter spec under its name whether or not one is there (a module imported again)."""
        self._specs[spec.name] = spec  # type: ignore[attr-defined]
        return spec

    def __getitem__(self, name: str) -> T:
        if name not in self._specs:
            close = close_names(name, self._specs)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UnknownName(f"unknown {self.what} {name!r}{hint} (known: {', '.join(self._specs)})")
        return self._specs[name]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def names(self, tag: str | None = None) -> list[str]:
        """The registered names; with tag, only those whose spec carries it in its ``tags``."""
        return [n for n, spec in self._specs.items() if tag is None or tag in getattr(spec, "tags", ())]


_ALL: dict[str, Registry] = {}
# the module whose import registers each kind's built-ins (and creates the registry)
HOMES = {"judge": "lookalike.judging.judges", "encoder": "lookalike.retrieval.encoders",
         "corpus.source": "lookalike.io.corpus", "rerank.method": "lookalike.retrieval.derived",
         "fusion method": "lookalike.retrieval.fusion", "derived system": "lookalike.retrieval.catalog"}


def named(what: str) -> Registry:
    """The registry of a kind of thing (HOMES), its built-ins registered."""
    if what not in _ALL:
        if what not in HOMES:
            raise UnknownName(f"no registry of {what!r} (known: {', '.join(HOMES)})")
        importlib.import_module(HOMES[what])
    return _ALL[what]


class PluginError(ValueError):
    """A plug-in named by import path could not be imported or is not there; the text says which and how."""


PLUGIN_HOW_TO = ('name a plug-in as "package.module:Class" (importable: installed, or its folder on PYTHONPATH) or '
                 '"path/to/file.py:Class" (relative to the repository root or the working directory)')


def is_plugin(spec: object) -> bool:
    """Whether a parameter value names a plug-in by import path (module:Class) rather than by name."""
    return ":" in str(spec)


def import_module(path_or_module: str, bases: Sequence[Path] = ()) -> object:
    """A module by dotted name, or a file "path/to/file.py" (tried as given, then under each base
    folder), imported once per file under a name made from its resolved path."""
    name = str(path_or_module)
    if not name.endswith(".py"):
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            raise PluginError(f"cannot import {name} ({exc}); {PLUGIN_HOW_TO}") from exc
    tried = [Path(name)] + [Path(b) / name for b in bases]
    path = next((p for p in tried if p.is_file()), None)
    if path is None:
        raise PluginError(f"no file {name} (looked in the working directory"
                          f"{' and ' + ', '.join(str(b) for b in bases) if bases else ''}); {PLUGIN_HOW_TO}")
    key = "lookalike_plugin_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    if key in sys.modules:
        return sys.modules[key]
    module_spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[key] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[key]
        raise PluginError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def load_plugin(spec: str, what: str, bases: Sequence[Path] = (), check: Callable[[object], None] | None = None,
                error: type[PluginError] | None = None) -> object:
    """The object a plug-in spec names, checked: every way it fails is one refusal in the project's words,
    naming the kind and the spec — no such file or module, a module whose import raises (a syntax error
    included), no such name in it, and whatever check(obj) refuses (not a class, not an encoder, a missing
    method). error: the PluginError subclass to raise (a kind's own error class may derive from it too)."""
    error = error or PluginError
    try:
        found = load(spec, bases)
    except PluginError as exc:
        raise error(f"{what} {exc}") from exc
    if not isinstance(found, type):
        raise error(f"{what} {spec!r}: names a {type(found).__name__}, not a class; {PLUGIN_HOW_TO}")
    if check is not None:
        try:
            check(found)
        except PluginError:
            raise
        except Exception as exc:
            raise error(str(exc) if str(exc).startswith(what) else f"{what} {spec!r}: {exc}") from exc
    return found


def construct(cls: type, what: str, spec: str, error: type[Exception], **kwargs) -> object:
    """A plug-in's instance: a constructor that raises is said with the plug-in's kind and spec and the
    error, and the run's words for where its settings come from (a built-in's errors pass as they are)."""
    try:
        return cls(**kwargs)
    except Exception as exc:
        if not is_plugin(spec):
            raise
        raise error(f"{what} {spec!r}: constructing {cls.__name__} failed: {type(exc).__name__}: {exc}") from exc


def load(spec: str, bases: Sequence[Path] = ()) -> object:
    """The object a plug-in spec names: "package.module:Class" or "path/to/file.py:Class"."""
    module_name, _, attr = str(spec).rpartition(":")
    if not module_name or not attr:
        raise PluginError(f"{spec!r}: expected module:Class; {PLUGIN_HOW_TO}")
    try:
        module = import_module(module_name, bases)
    except PluginError as exc:
        raise PluginError(f"{spec!r}: {exc}") from exc
    found = getattr(module, attr, None)
    if found is None:
        raise PluginError(f"{spec!r}: {module_name} has no {attr!r}")
    return found
