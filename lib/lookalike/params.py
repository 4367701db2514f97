"""Run parameters: params/base.yaml deep-merged with a run file, checked key by key.

papermill only warns about unknown parameters and merges YAML shallowly, so the runner does the
merge and the checks itself: every key of a run file must exist in base.yaml (which is the schema,
with defaults) and carry a value of the same type.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_PARAMS = REPO_ROOT / "params" / "base.yaml"


class ParamsError(ValueError):
    """A parameter file is missing, unreadable, or sets a key or type base.yaml does not allow."""


def read_yaml(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: parameter file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
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


def _compatible(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if default is None:
        return True
    return isinstance(value, type(default))


def deep_merge(base: dict[str, Any], override: dict[str, Any], source: Path, prefix: str = "") -> dict[str, Any]:
    """Return base updated by override, recursing into mappings; never mutates either input."""
    merged = dict(base)
    for key, value in override.items():
        dotted = f"{prefix}{key}"
        if key not in base:
            allowed = ", ".join(sorted(f"{prefix}{k}" for k in base))
            raise ParamsError(f"{source}: unknown key '{dotted}' (allowed here: {allowed})")
        default = base[key]
        if isinstance(default, dict):
            if not isinstance(value, dict):
                raise ParamsError(f"{source}: key '{dotted}' must be a mapping, got {_type_name(value)}")
            merged[key] = deep_merge(default, value, source, prefix=f"{dotted}.")
        elif not _compatible(default, value):
            raise ParamsError(
                f"{source}: key '{dotted}' must be a {_type_name(default)} "
                f"(like the default {default!r}), got {_type_name(value)} {value!r}"
            )
        else:
            merged[key] = float(value) if isinstance(default, float) else value
    return merged


def load_params(run_file: Path | str, base_file: Path | str = BASE_PARAMS) -> dict[str, Any]:
    """Merged parameters of one run: base.yaml deep-merged with run_file, every key checked."""
    base = read_yaml(Path(base_file))
    override = read_yaml(Path(run_file))
    return deep_merge(base, override, Path(run_file))


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested params -> the flat names notebooks declare: {'corpus': {'source': x}} -> corpus_source."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, prefix=f"{name}_"))
        else:
            flat[name] = value
    return flat


def params_hash(params: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the merged parameters (key order does not matter)."""
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def repo_path(value: str) -> Path | None:
    """A path parameter as a Path: absolute paths as given, relative ones from the repository root
    (where `make` runs); None for an empty value."""
    if not value:
        return None
    p = Path(value)
    return p if p.is_absolute() else REPO_ROOT / p
