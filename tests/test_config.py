"""Typed configuration: params.typed gives frozen dataclasses; every stage builds its encoders from
the user's encode settings through one function; no layer below the stages reads a dotted key."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from collections.abc import Mapping

import pytest

from lookalike import params
from lookalike.retrieval import systems
from lookalike.stages.base import context

LIB = Path(params.__file__).resolve().parent
STAGES = sorted(p for p in (LIB / "stages").glob("*.py") if p.name not in ("__init__.py", "base.py"))
DOTTED = re.compile(r"""(\bctx\.get\(|\bget\(\s*["'][a-z_]+\.[a-z_]+["']|\.params\[\s*["'](?!run\b))""")


def test_typed_parameters_are_frozen_and_complete():
    cfg = params.typed(params.check({"encode": {"device": "cpu", "settings": {"clip": {"model": "/m"}}}}))
    assert cfg.encode.device == "cpu" and isinstance(cfg.encode.encoders, tuple)
    assert isinstance(cfg.encode.settings, Mapping) and cfg.encode.settings["clip"]["model"] == "/m"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.encode.device = "cuda"
    with pytest.raises(TypeError):
        cfg.encode.settings["clip"] = {}                      # read-only all the way down
    base = params.read_yaml(params.BASE_PARAMS)
    for section, body in base.items():
        if isinstance(body, dict) and body:
            assert {f.name for f in dataclasses.fields(getattr(cfg, section))} == set(body), section
    assert params.thaw(cfg.encode.settings) == {"clip": {"model": "/m"}}


def test_every_stage_builds_encoders_from_the_users_settings(tmp_path):
    """Before, four stages replaced encode.device and encode.batch_size with auto / 32, so stage 02
    and stages 04-07 could build different encoders. Now no stage calls run_settings itself or passes
    an override: they all ask the context, which returns what the user set."""
    offenders = []
    for path in STAGES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "run_settings":
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == [], f"stages building encoder settings on their own: {offenders}"
    users = [p.name for p in STAGES if "encoder_settings()" in p.read_text(encoding="utf-8")]
    assert {"encode.py", "leak_ablation.py", "hard_negatives.py", "validate_questions.py", "judge_pool.py", "metric_tables.py"} <= set(users)
    ctx = context(tmp_path, {"encode": {"device": "cpu", "batch_size": 7, "encoders": ["ocr-minilm", "appearance"]}})
    settings = ctx.encoder_settings()
    assert settings["device"] == "cpu" and settings["batch_size"] == 7
    ids = [systems.make_encoder(spec, **settings).id for spec in ctx.config.encode.encoders]
    assert ids == [systems.make_encoder(spec, **ctx.encoder_settings()).id for spec in ctx.config.encode.encoders]


def test_no_layer_below_the_stages_reads_a_dotted_parameter():
    found = []
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(LIB).as_posix()
        if rel.startswith(("stages/", "cli/")) or rel == "params.py":
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if DOTTED.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{rel}:{no}: {line.strip()}")
    assert found == [], "\n".join(found)


SECTIONS = {k: set(v) for k, v in params.read_yaml(params.BASE_PARAMS).items() if isinstance(v, dict)}
# a section of the parameter tree read by name, then one of its keys: params["corpus"]["source"],
# (params.get("corpus") or {}).get("source"), cfg_dict.get("labels", {})["db"]
SECTION_KEY = re.compile(r"""(?:\[\s*["'](\w+)["']\s*\]|\.get\(\s*["'](\w+)["'][^)]*\)(?:\s*or\s*\{\}\s*\))?)"""
                         r"""\s*(?:\.get\(\s*["'](\w+)["']|\[\s*["'](\w+)["']\s*\])""")
# the tree itself by its usual names: params[...], params.get(...), manifest["params"], data.get("params")
TREE = re.compile(r"""(\bparams\s*(?:\.get\(|\[)|(?:\.get\(|\[)\s*["']params["'])""")


def raw_tree_reads(text: str) -> list[tuple[int, str]]:
    """(line, text) of each read of the raw parameter tree in a module's source."""
    found = []
    for no, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        section_key = any((m.group(1) or m.group(2)) in SECTIONS and (m.group(3) or m.group(4)) in SECTIONS[m.group(1) or m.group(2)]
                          for m in SECTION_KEY.finditer(line))
        if section_key or TREE.search(line):
            found.append((no, line.strip()))
    return found


def test_no_layer_below_the_stages_reads_the_raw_parameter_tree():
    """Below the stages a run's parameters are typed (params.typed, or params.recorded for a finished
    run's manifest through report.run_folder.run_config, the one reader of a manifest's params): the
    audit, the label server and the index page once walked the dict by section and key, which neither
    the dotted-key check nor a type checker sees."""
    found = []
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(LIB).as_posix()
        if rel.startswith(("stages/", "cli/")) or rel in ("params.py", "api.py", "report/run_folder.py"):
            continue
        found += [f"{rel}:{no}: {line}" for no, line in raw_tree_reads(path.read_text(encoding="utf-8"))]
    assert found == [], "\n".join(found)


def test_the_raw_tree_check_sees_each_way_of_walking_it():
    for line in ['source = (params.get("corpus") or {}).get("source", "demo")', 'db = p["labels"]["db"]',
                 "x = cfg_tree.get('judges', {})['url']", 'corpus = params.get("corpus", {})',
                 'given = data.get("params", {})', 'run = manifest["params"]["run"]']:
        assert raw_tree_reads(line), line
    for line in ['rows = suff[suff["negatives"] == "hard"]', 'first["labels"]', 'c["questions"]',
                 'source = cfg.corpus.source', 'spec["questions"]']:
        assert not raw_tree_reads(line), line


def test_a_finished_runs_parameters_are_read_typed(tmp_path):
    from lookalike.report import run_folder

    assert run_folder.run_config(tmp_path) is None                        # no manifest
    (tmp_path / "manifest.json").write_text('{"params": {"corpus": {"source": "images"}, "judges": {"samples": 3}}}',
                                            encoding="utf-8")
    cfg = run_folder.run_config(tmp_path)
    assert cfg.corpus.source == "images" and cfg.judges.samples == 3 and cfg.labels.per_pair == params.typed(params.check({})).labels.per_pair
    # a plug-in the run named need not import where its folder is read: values are not checked again
    (tmp_path / "manifest.json").write_text('{"params": {"validate": {"judge": "gone/judge.py:Gone"}}}', encoding="utf-8")
    assert run_folder.run_config(tmp_path).validate.judge == "gone/judge.py:Gone"
    (tmp_path / "manifest.json").write_text('{"params": {"corpus": {"sauce": "images"}}}', encoding="utf-8")
    with pytest.raises(run_folder.ManifestError, match="unknown key 'corpus.sauce'"):
        run_folder.run_config(tmp_path)
    (tmp_path / "manifest.json").write_text('{"params": [1]}', encoding="utf-8")
    with pytest.raises(run_folder.ManifestError, match="'params' is an object"):
        run_folder.run_config(tmp_path)


def test_the_stages_read_the_typed_configuration():
    """The stages read ctx.config.section.key (typed, seen by mypy), not ctx.get("section.key") or
    ctx.path("section.key"): 16 dotted reads were left in stages 01, 03 and 07."""
    found = []
    for path in STAGES:
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.search(r"\bctx\.(get|path)\(", line) and not line.lstrip().startswith("#"):
                found.append(f"{path.name}:{no}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_the_dotted_read_check_sees_one():
    assert DOTTED.search('method = get("rerank.method")') and DOTTED.search("x = ctx.get('seed')")
    assert not DOTTED.search('vecs = unit_vectors.get(name)')


def test_the_judge_endpoint_is_one_section_and_an_old_key_is_told_its_new_name(tmp_path):
    """judges.url / model / samples / temperature serve stages 05, 06 and 08 alike; a run file that still
    says validate.judge_url is refused with the key's new name, not just 'unknown key'."""
    from lookalike import stages

    ctx = stages.context(tmp_path, params.check({"judges": {"url": "http://x/v1", "model": "m", "samples": 3}}))
    got = ctx.judge_settings(tmp_path)
    assert (got["url"], got["model"], got["samples"]) == ("http://x/v1", "m", 3)
    old = tmp_path / "old.yaml"
    old.write_text("run: old\nvalidate:\n  judge_url: http://x/v1\n", encoding="utf-8")
    with pytest.raises(params.ParamsError, match="'validate.judge_url' is now 'judges.url'"):
        params.load_params(old)
