import ast
import re
import json

import nbformat
import papermill as pm
import pytest
from lookalike import params
from lookalike.cli import run

from tests.conftest import REPO, write_params


def test_deep_merge_keeps_unset_nested_defaults(tmp_path):
    f = write_params(tmp_path / "r.yaml", "run: x\ncorpus:\n  demo_size: demo\n")
    merged = params.load_params(f)
    assert merged["run"] == "x"
    assert merged["corpus"]["demo_size"] == "demo"
    assert merged["corpus"]["source"] == "demo"          # untouched sibling default survives


def test_unknown_key_is_an_error_naming_key_and_file(tmp_path):
    f = write_params(tmp_path / "typo.yaml", "corpus:\n  demo_sise: demo\n")
    with pytest.raises(params.ParamsError) as err:
        params.load_params(f)
    assert "corpus.demo_sise" in str(err.value) and "typo.yaml" in str(err.value)


def test_wrong_type_is_an_error_naming_key_and_file(tmp_path):
    f = write_params(tmp_path / "bad.yaml", "sample:\n  per_stratum: many\n")
    with pytest.raises(params.ParamsError, match=r"bad.yaml.*sample.per_stratum.*integer"):
        params.load_params(f)
    f = write_params(tmp_path / "bad2.yaml", "corpus: demo\n")
    with pytest.raises(params.ParamsError, match=r"bad2.yaml.*'corpus' must be a mapping"):
        params.load_params(f)
    f = write_params(tmp_path / "bad3.yaml", "corpus:\n  strict: 1\n")
    with pytest.raises(params.ParamsError, match="boolean"):
        params.load_params(f)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(params.ParamsError, match="nope.yaml: parameter file not found"):
        params.load_params(tmp_path / "nope.yaml")
    f = write_params(tmp_path / "broken.yaml", "run: [unclosed\n")
    with pytest.raises(params.ParamsError, match="broken.yaml: not valid YAML"):
        params.load_params(f)


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path):
    """YAML keeps the later of two equal keys: a second encode: section silently dropped the first's settings."""
    f = write_params(tmp_path / "twice.yaml", "run: x\nencode:\n  encoders: [appearance]\nseed: 3\nencode:\n  batch_size: 4\n")
    with pytest.raises(params.ParamsError, match=r"twice.yaml: not valid YAML: key 'encode' is written twice \(first on line 2, "
                                            r"again on line 5\)"):
        params.load_params(f)
    f = write_params(tmp_path / "nested.yaml", "corpus:\n  dpi: 100\n  dpi: 120\n")
    with pytest.raises(params.ParamsError, match="key 'dpi' is written twice"):
        params.load_params(f)


def test_merge_does_not_mutate_inputs(tmp_path):
    base = params.read_yaml(params.BASE_PARAMS)
    snapshot = json.dumps(base, sort_keys=True)
    params.deep_merge(base, {"corpus": {"demo_size": "demo"}}, tmp_path / "x.yaml")
    assert json.dumps(base, sort_keys=True) == snapshot


def test_params_hash_ignores_key_order():
    assert params.params_hash({"a": 1, "b": 2}) == params.params_hash({"b": 2, "a": 1})


def test_cli_rejects_unknown_key_with_exit_code_2(tmp_path, capsys):
    from lookalike.cli import main

    f = write_params(tmp_path / "typo.yaml", "rnu: demo\n")
    assert main(["run", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'rnu'" in err and "typo.yaml" in err


@pytest.mark.parametrize("stage", run.STAGES)
def test_every_parameters_cell_line_is_seen_by_papermill(stage):
    """papermill silently skips a parameter line it cannot parse (e.g. odd comments); we must not."""
    nb = nbformat.read(REPO / "notebooks" / f"{stage}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assigned = [n.targets[0].id for n in ast.parse(cell.source).body if isinstance(n, ast.Assign)]
    assert list(pm.inspect_notebook(str(REPO / "notebooks" / f"{stage}.ipynb"))) == assigned


@pytest.mark.parametrize("stage", run.STAGES)
def test_notebooks_restate_no_defaults(stage):
    """Defaults live in params/base.yaml only: a notebook declares its run folder and an empty
    params mapping, which the runner fills with the whole merged parameter set."""
    declared = pm.inspect_notebook(str(REPO / "notebooks" / f"{stage}.ipynb"))
    assert set(declared) == {run.RUN_DIR_PARAM, run.PARAMS_PARAM}
    assert ast.literal_eval(declared[run.RUN_DIR_PARAM]["default"]) == "../outputs/ci"
    assert ast.literal_eval(declared[run.PARAMS_PARAM]["default"]) == {}


def test_enum_typo_is_an_error_naming_key_file_and_allowed_values(tmp_path):
    f = write_params(tmp_path / "typo.yaml", "validate:\n  judge: refrence\n")
    with pytest.raises(params.ParamsError) as e:
        params.load_params(f)
    msg = str(e.value)
    assert "typo.yaml" in msg and "'validate.judge'" in msg and "refrence" in msg
    assert "reference, answer-string, human, openai-compatible" in msg


@pytest.mark.parametrize("text, key", [
    ("negatives:\n  k: 0\n", "negatives.k"),
    ("leak:\n  threshold: 1.5\n", "leak.threshold"),
    ("corpus:\n  page_base: 2\n", "corpus.page_base"),
    ("encode:\n  device: gpu\n", "encode.device"),
])
def test_out_of_range_values_are_errors(tmp_path, text, key):
    f = write_params(tmp_path / "bad.yaml", text)
    with pytest.raises(params.ParamsError, match=re.escape(f"'{key}'")):
        params.load_params(f)


def test_cuda_device_index_and_empty_enum_values_are_allowed(tmp_path):
    f = write_params(tmp_path / "ok.yaml", "encode:\n  device: cuda:1\n  ocr_engine: ''\nvalidate:\n  compare_judge: ''\n")
    assert params.load_params(f)["encode"]["device"] == "cuda:1"


def test_every_constraint_in_base_yaml_is_understood_and_met_by_the_defaults():
    merged = params.read_yaml(params.BASE_PARAMS)
    params.check_constraints(merged, params.BASE_PARAMS)
    assert {"validate.judge", "corpus.source", "negatives.k", "labels.adjudicator"} <= set(params.constraints())


def test_injected_parameters_are_checked_too():
    with pytest.raises(params.ParamsError, match="'mining.question_set'"):
        params.check({"mining": {"question_set": "validatd"}})


@pytest.mark.parametrize("name", ["ci", "demo"])
def test_shipped_params_files_load(name):
    merged = params.load_params(REPO / "params" / f"{name}.yaml")
    assert merged["run"] == name


def test_a_near_miss_key_is_suggested_by_edit_distance(tmp_path):
    """encode.bach_size listed every key of encode but suggested none."""
    path = tmp_path / "run.yaml"
    path.write_text("run: p\ncorpus:\n  source: demo\nencode:\n  bach_size: 4\n", encoding="utf-8")
    with pytest.raises(params.ParamsError, match=r"unknown key 'encode.bach_size'; did you mean encode.batch_size\?"):
        params.load_params(path)
