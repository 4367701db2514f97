"""Run parameters: the schema's defaults (lookalike.config, the declared types) deep-merged with a run
file, checked key by key, and handed to the stages as that schema's frozen dataclasses.

papermill only warns about unknown parameters and merges YAML shallowly, so the runner does the
merge and the checks itself. Each key's field in lookalike.config gives its default (which fixes the
type a run file must use), what it does, and optionally the allowed values, in this language —
  {one of: a, b, ''}       the value must be one of these ('' is the empty string)
  {>= 1}  {0..1}  {(0..1]} numbers: a lower bound, a closed range, or one open below
  {names: judge[model|reference], auto, ''}
                           a name registered in that registry (lookalike.registry.named) when the run
                           is checked — the built-ins and any plug-in's (the plugins key imports them
                           first) — optionally only those carrying one of the tags in brackets, a
                           plug-in by import path ("package.module:Class", "path/to/file.py:Class"),
                           or one of the words after it
  {matches: REGEX}         strings: the whole value matches
  {non-empty}              lists: at least one entry
  {each: SPEC}             lists: every entry satisfies SPEC (named by its place when it does not)
  several joined by ';' must all hold, e.g. {non-empty; each: (0..1]}
Every key of a run file must exist in the schema, carry a value of the same type and satisfy its
constraint (a key whose default is an empty mapping takes a mapping of any keys: per-encoder
settings, read by the code that owns them); an error names the key, the file and what is allowed.
base.yaml and docs/parameters.md are written from the schema (base_yaml, reference_markdown; ``make
docs``). Defaults live there only: the runner injects every parameter into every stage.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import Field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any
from collections.abc import Mapping

import yaml

from lookalike import config, registry

PACKAGE_DIR = Path(__file__).resolve().parent
# the schema ships inside the package, so an installed lookalike (not only a checkout) finds it
BASE_PARAMS = PACKAGE_DIR / "base.yaml"


def _checkout() -> Path | None:
    """The repository lookalike runs from, or None for an installed package."""
    root = PACKAGE_DIR.parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "lib" / "lookalike").is_dir() else None


CHECKOUT = _checkout()
PROJECT_ENV = "LOOKALIKE_PROJECT_ROOT"
# Where relative paths in params (and outputs/) start: the checkout's root (where `make` runs), or —
# an installed package — the folder lookalike was started in. The runner passes it on to the stage
# kernels in PROJECT_ENV, since they run inside the run's notebooks folder.
PROJECT_ROOT = CHECKOUT or Path(os.environ.get(PROJECT_ENV) or Path.cwd())


class ParamsError(ValueError):
    """A parameter file is missing, unreadable, or sets a key or type base.yaml does not allow."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping (YAML keeps the later silently, so a
    second ``encode:`` section would drop everything the first one set) and any alias (``*name``):
    a parameter file has no need to repeat a node, and nested aliases expand exponentially (nine
    levels of them grew past 2.4 GB when merged and serialised)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"the alias *{event.anchor} repeats another node; parameter files may not use YAML "
                "aliases (write the value out where it is needed)", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice (first on line {seen[key] + 1}, again on line "
                    f"{key_node.start_mark.line + 1}); YAML would keep only the second", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> dict[str, Any]:
    """A parameter file's mapping ({} when empty); ParamsError names the file when it is missing, not
    YAML, not a mapping, repeats a key or uses an alias."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: parameter file not found")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping", type(None): "null"}.get(type(value), type(value).__name__)


def compatible(default: Any, value: Any) -> bool:
    """Whether value may stand where default is: the same type, a whole number for a float, never a
    boolean for a number (or the other way), anything where the default is None. The one rule for a
    parameter's type and an encoder setting's (retrieval.encoders.Setting)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if default is None:
        return True
    return isinstance(value, type(default))


# keys that moved, with where they went: a run file that still uses one is told the new name
MOVED = {"validate.judge_url": "judges.url", "validate.judge_model": "judges.model",
         "validate.judge_samples": "judges.samples", "validate.judge_temperature": "judges.temperature"}


def deep_merge(base: dict[str, Any], override: dict[str, Any], source: Path, prefix: str = "") -> dict[str, Any]:
    """Return base updated by override, recursing into mappings; never mutates either input."""
    merged = dict(base)
    for key, value in override.items():
        dotted = f"{prefix}{key}"
        if dotted in MOVED:
            raise ParamsError(f"{source}: '{dotted}' is now '{MOVED[dotted]}' (one judges: section holds the judge "
                              f"endpoint for every stage that judges); rename it there")
        if key not in base:
            allowed = ", ".join(sorted(f"{prefix}{k}" for k in base))
            close = registry.close_names(str(key), [str(k) for k in base])
            hint = f"; did you mean {' or '.join(prefix + c for c in close)}?" if close else ""
            raise ParamsError(f"{source}: unknown key '{dotted}'{hint} (allowed here: {allowed})")
        default = base[key]
        if isinstance(default, dict):
            if not isinstance(value, dict):
                raise ParamsError(f"{source}: key '{dotted}' must be a mapping, got {_type_name(value)}")
            # an empty default mapping is an open one (its keys are names the owner checks)
            merged[key] = dict(value) if not default else deep_merge(default, value, source, prefix=f"{dotted}.")
        elif not compatible(default, value):
            raise ParamsError(
                f"{source}: key '{dotted}' must be a {_type_name(default)} "
                f"(like the default {default!r}), got {_type_name(value)} {value!r}"
            )
        else:
            merged[key] = float(value) if isinstance(default, float) else value
    return merged


def load_params(run_file: Path | str) -> dict[str, Any]:
    """Merged parameters of one run: the schema's defaults deep-merged with run_file, every key checked."""
    override = read_yaml(Path(run_file))
    merged = deep_merge(defaults(), override, Path(run_file))
    check_constraints(merged, run_file)
    return merged


def params_hash(params: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the merged parameters (key order does not matter)."""
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def repo_path(value: str) -> Path | None:
    """A path parameter as a Path: absolute paths as given, relative ones from PROJECT_ROOT (a
    checkout's root, where `make` runs, or the folder an installed lookalike runs in); None when empty."""
    return repo_file(value) if value else None


def repo_file(value: str) -> Path:
    """repo_path of a path that is given (a run file's entry, never empty)."""
    p = Path(value)
    return p if p.is_absolute() else PROJECT_ROOT / p


# ----------------------------------------------------------------------------- the schema (lookalike.config)

def schema() -> list[tuple[str, str, Field]]:
    """(section, key, its dataclass field) for every parameter in the schema's order; section "" for the
    run-wide keys (run, title, seed, plugins)."""
    out = [("", f.name, f) for f in fields(config.Config) if f.name not in config.SECTIONS]
    for section, cls in config.SECTIONS.items():
        out += [(section, f.name, f) for f in fields(cls)]
    return out


def _plain(value: Any) -> Any:
    """A default as the YAML / JSON value a run file writes: tuples as lists, mappings as dicts."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def defaults() -> dict[str, Any]:
    """Every key with its default, as plain values (a fresh copy): what a run file is merged over."""
    cfg = config.Config()
    out: dict[str, Any] = {}
    for section, name, _ in schema():
        if section:
            out.setdefault(section, {})[name] = _plain(getattr(getattr(cfg, section), name))
        else:
            out[name] = _plain(getattr(cfg, name))
    return out


def _dotted(section: str, name: str) -> str:
    return f"{section}.{name}" if section else name


def constraints() -> dict[str, str]:
    """Dotted key -> its constraint (the field's ``allowed``), for the keys that have one."""
    return {_dotted(section, name): f.metadata["allowed"] for section, name, f in schema() if f.metadata["allowed"]}


def allowed_values(dotted: str) -> list[str] | None:
    """The values the schema allows for a key ({one of: ...}, '' for the empty string; {names: ...} the
    words, then the registry's names now), or None when the key's constraint is not a list of values
    (a {names: ...} key also takes a plug-in by import path)."""
    spec = constraints().get(dotted, "")
    for part in spec.split(";"):
        part = part.strip()
        if part.startswith("one of:"):
            return _words(part[len("one of:"):].split(","))
        if part.startswith("names:"):
            names, words = _registry_names(part)
            return words + names
    return None


def _words(items) -> list[str]:
    return ["" if a.strip() in ("''", '""') else a.strip() for a in items]


def _registry_names(spec: str) -> tuple[list[str], list[str]]:
    """{names: what[tag|tag], word, ...}: the registry's names carrying one of the tags (all without
    brackets), and the extra words."""
    what, *words = spec[len("names:"):].split(",")
    m = re.fullmatch(r"\s*([^\[\]]+?)\s*(?:\[([^\]]*)\])?\s*", what)
    if not m:
        raise ParamsError(f"lookalike/config.py: constraint {{{spec}}} is not understood")
    reg = registry.named(m.group(1))
    tags = [t.strip() for t in m.group(2).split("|")] if m.group(2) else [None]
    names = [n for n in reg.names() if any(n in reg.names(t) for t in tags)]
    return names, _words(words)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _violation(spec: str, value: Any) -> str | None:
    """What is wrong with value under spec, or None. Specs joined by ';' must all hold; list specs:
    ``non-empty``, and ``each: SPEC`` (SPEC applied to every element, each named by its place)."""
    if ";" in spec:
        for part in spec.split(";"):
            problem = _violation(part.strip(), value)
            if problem:
                return problem
        return None
    if spec == "non-empty":
        return None if value else "must list at least one entry, got an empty list"
    if spec.startswith("each:"):
        inner = spec[len("each:"):].strip()
        if not isinstance(value, list):
            return f"must be a list, got {value!r}"
        for i, item in enumerate(value):
            problem = _violation(inner, item)
            if problem:
                return f"entry {i + 1} ({item!r}) {problem}"
        return None
    if spec.startswith("one of:"):
        allowed = [a.strip() for a in spec[len("one of:"):].split(",")]
        allowed = ["" if a in ("''", '""') else a for a in allowed]
        if str(value) not in allowed:
            shown = ", ".join(repr(a) if a == "" else a for a in allowed)
            return f"must be one of {shown}, got {value!r}"
        return None
    if spec.startswith("names:"):
        return _name_violation(spec, value)
    if spec.startswith("matches:"):
        pattern = spec[len("matches:"):].strip()
        if not isinstance(value, str):
            return f"must be text matching {pattern}, got {value!r}"
        return None if re.fullmatch(pattern, value) else f"must match {pattern}, got {value!r}"
    m = re.fullmatch(r"length\s*<=\s*(\d+)", spec)
    if m:
        # a name that becomes a folder: file systems refuse a name over 255 bytes, and paths grow from it
        return None if len(str(value)) <= int(m.group(1)) else f"must be at most {m.group(1)} characters, got {len(str(value))}"
    m = re.fullmatch(r">=\s*(-?[\d.]+)", spec)
    if m:
        if not _is_number(value):
            return f"must be a number, got {value!r}"
        return None if value >= float(m.group(1)) else f"must be >= {m.group(1)}, got {value!r}"
    m = re.fullmatch(r"(\(?)(-?[\d.]+)\s*\.\.\s*(-?[\d.]+)\]?", spec)
    if m:
        if not _is_number(value):
            return f"must be a number, got {value!r}"
        open_lo, lo, hi = bool(m.group(1)), float(m.group(2)), float(m.group(3))
        ok = (lo < value if open_lo else lo <= value) and value <= hi
        shown = f"above {m.group(2)} and at most {m.group(3)}" if open_lo else f"between {m.group(2)} and {m.group(3)}"
        return None if ok else f"must be {shown}, got {value!r}"
    raise ParamsError(f"lookalike/config.py: constraint {{{spec}}} is not understood")


def _name_violation(spec: str, value: Any) -> str | None:
    """{names: ...}: a registered name (with its tag), a word, or a plug-in by import path that imports
    and registers (its registry's ``plugin`` hook: a judge class is checked and entered by its name)."""
    names, words = _registry_names(spec)
    what = spec[len("names:"):].split(",")[0].split("[")[0].strip()
    value = str(value)
    if value in names or value in words:
        return None
    shown = ", ".join([repr(w) if w == "" else w for w in words] + names)
    reg = registry.named(what)
    hook = getattr(reg, "plugin", None)
    if registry.is_plugin(value) and hook is not None:
        try:
            name = hook(value, [PROJECT_ROOT])
        except (registry.PluginError, RuntimeError, ValueError) as exc:
            return f"names a plug-in {what} that does not load: {exc}"
        if name in _registry_names(spec)[0]:         # read again: loading it entered it
            return None
        return f"names the plug-in {what} {name!r}, which is not one of the kinds allowed here ({shown})"
    registered = reg.names()
    if value in registered:
        return f"must be one of {shown} (a {what} of the kind this key needs), got {value!r}"
    how = f'; or a plug-in {what} by import path, {registry.PLUGIN_HOW_TO[len("name a plug-in as "):]}' if hook else ""
    return f"must be one of {shown}{how}, got {value!r}"


def import_plugins(params: Mapping[str, Any], source: Path | str) -> None:
    """Import the modules the plugins key lists (each once), so what they register — a judge entered with
    lookalike.plugin.register_judge — can be named by the run's other keys, in this process and in
    every stage's."""
    for i, entry in enumerate(params.get("plugins") or []):
        try:
            registry.import_module(str(entry), [PROJECT_ROOT])
        except registry.PluginError as exc:
            raise ParamsError(f"{source}: key 'plugins' entry {i + 1} ({entry!r}): {exc}") from exc


def check_constraints(params: dict[str, Any], source: Path | str) -> None:
    """Every constraint of the schema on merged parameters (the plug-ins they list imported first);
    ParamsError names the key, the file (source) and what is allowed."""
    import_plugins(params, source)
    for dotted, spec in constraints().items():
        value: Any = params
        for part in dotted.split("."):
            value = value[part]
        problem = _violation(spec, value)
        if problem:
            raise ParamsError(f"{source}: key '{dotted}' {problem}")
    for i, window in enumerate(params["mining"]["windows"]):
        lo, hi = (int(x) for x in window.split("-"))
        if lo > hi:
            raise ParamsError(f"{source}: key 'mining.windows' entry {i + 1} ({window!r}) must run from a lower rank "
                              f"to a higher one, e.g. '{hi}-{lo}'")


def check(params: dict[str, Any], source: str = "injected parameters") -> dict[str, Any]:
    """A full or partial parameter mapping merged over base.yaml's defaults and checked (keys,
    types, constraints): what a stage works with."""
    merged = deep_merge(defaults(), params, Path(source))
    check_constraints(merged, source)
    return merged


REFERENCE_INTRO = """# Parameters

Generated from lookalike's schema — the declared types in `lib/lookalike/config.py` — by `make docs`,
with `lib/lookalike/base.yaml` (`params/base.yaml` in a checkout points to it); a test fails when this
page or base.yaml and the schema differ.

A run file (`params/ci.yaml`, `params/demo.yaml` or yours) is deep-merged over these defaults. A key
that is not here, a value of another type, or one outside the allowed values stops the run at load
time, naming the key, the file and what is allowed (`lookalike check PARAMS.yaml` says the same in
seconds). Relative paths start at the checkout's root (where `make` runs), or, for an installed
lookalike, at the folder it runs in.

`names: judge, auto` in the allowed column: the name of any judge registered when the run is
checked (the built-ins: {judges}; a plug-in's, when its
module is listed in `plugins`), a plug-in judge by import path (`"path/to/file.py:Class"` or
`"package.module:Class"`), or one of the words after it; `judge[model]` takes only judges whose
labels are a model's, `judge[model|reference]` a model's or an answer key's.
"""


def reference_markdown() -> str:
    """docs/parameters.md: one table per section of the schema — key, default, allowed values (the
    constraint) and what it does — in the schema's own order, each section with its description."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")
    judges = registry.named("judge")
    built_in = [n for n, spec in judges.items() if str(getattr(spec.make, "__module__", "")).startswith("lookalike.")]
    out = [REFERENCE_INTRO.format(judges=", ".join(built_in))]
    for section in ["", *config.SECTIONS]:
        out.append(f"## {section or 'the run'}\n")
        if section:
            out.append(f"{_section_doc(section)}\n")
        out.append("| key | default | allowed | what it does |\n|---|---|---|---|")
        values = defaults()
        for sec, name, f in schema():
            if sec == section:
                value = values[sec][name] if sec else values[name]
                out.append(f"| `{_dotted(sec, name)}` | `{cell(json.dumps(value, ensure_ascii=False))}` | "
                           f"{cell(f.metadata['allowed'])} | {cell(f.metadata['doc'])} |")
        out.append("")
    return "\n".join(out)


def _section_doc(section: str) -> str:
    return " ".join((config.SECTIONS[section].__doc__ or "").split())


BASE_YAML_INTRO = """\
# Every key a run may set, with its default and what it does. Written from lookalike/config.py (the
# schema as declared types) by `make docs`: change a key there, not here (a test fails when the two
# differ). A run file (params/<run>.yaml) overrides these by deep merge; a key that is not here, or a
# value of another type, is an error that names the key and the file. A comment that starts with a
# constraint in braces gives the allowed values. The runner hands the whole merged set to every stage
# notebook (its `params` cell).
"""
_PLAIN = re.compile(r"[A-Za-z0-9_./~<>@$()|*+-][A-Za-z0-9_./~<>@$()|*+ -]*")


def _yaml_value(value: Any) -> str:
    """A default as YAML on one line: plain where YAML reads it back as the same string, JSON-quoted
    (YAML's double-quoted style) where not."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    plain = _PLAIN.fullmatch(text) and text == text.strip() and yaml.safe_load(text) == text
    return text if plain else json.dumps(text, ensure_ascii=False)


def base_yaml() -> str:
    """base.yaml's text: every key with its default and a comment (the constraint in braces, then what
    the key does), section by section, each section's line with its description."""
    def line(indent: str, name: str, value: str, comment: str) -> str:
        head = f"{indent}{name}:" + (f" {value}" if value else "")
        return f"{head.ljust(27)}  # {comment}" if comment else head
    values = defaults()
    out = [BASE_YAML_INTRO.rstrip("\n")]
    current = ""
    for section, name, f in schema():
        if section != current:
            out.append(line("", section, "", _section_doc(section)))
            current = section
        value = values[section][name] if section else values[name]
        allowed, doc = f.metadata["allowed"], f.metadata["doc"]
        out.append(line("  " if section else "", name, _yaml_value(value), (f"{{{allowed}}} " if allowed else "") + doc))
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- typed configuration

def _frozen(value: Any) -> Any:
    """A parameter value that cannot be changed in place: lists become tuples, mappings read-only."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def thaw(value: Any) -> Any:
    """The plain form of a frozen value (tuples -> lists, read-only mappings -> dicts), for code that
    serialises it (an encoder's id is JSON of its settings)."""
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    return value


def typed(params: dict[str, Any]) -> config.Config:
    """The merged, checked parameters as the schema's frozen dataclasses (lookalike.config):
    cfg.encode.device, cfg.rerank.systems. Stages hand these (or plain values from them) to the layers
    below; no layer below the stages reads a parameter by its dotted name."""
    values: dict[str, Any] = {}
    for k, v in params.items():
        values[k] = (config.SECTIONS[k](**{kk: _frozen(vv) for kk, vv in v.items()}) if k in config.SECTIONS
                     else _frozen(v))
    return config.Config(**values)


def recorded(given: Mapping[str, Any], source: str = "manifest.json") -> config.Config:
    """A finished run's parameters (its manifest.json's ``params``) as typed configuration: merged over
    base.yaml's defaults and typed, for the code that reads a run folder (the audit, the label server, the
    index page). Keys and types are checked by the merge; the allowed values are not checked again — the
    run was checked when it ran, and a plug-in it named need not import where its folder is read."""
    return typed(deep_merge(defaults(), dict(given), Path(source)))
