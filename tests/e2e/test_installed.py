"""lookalike installed as a package (not editable, not from the checkout) runs the whole report from
another folder: base.yaml and the stage notebooks travel inside the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import copy_of_checkout

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """`pip install --target` of a copy of the checkout (no deps: they are this environment's)."""
    root = tmp_path_factory.mktemp("install")
    src = copy_of_checkout(root / "src")
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, capture_output=True)
    return target


def _env(target: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(target))
    for name in ("LOOKALIKE_PROGRESS", "LOOKALIKE_PROJECT_ROOT"):
        env.pop(name, None)
    return env


def test_the_package_carries_its_schema_and_stages(installed):
    pkg = installed / "lookalike"
    assert (pkg / "base.yaml").is_file() and not (pkg / "base.yaml").is_symlink()
    assert sorted(p.name for p in (pkg / "notebooks").glob("*.ipynb")) == sorted(
        p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert list((pkg / "report" / "templates").glob("*.j2"))


def test_an_installed_lookalike_runs_the_ci_report_from_another_folder_to_the_same_tables(installed, ci_run, tmp_path):
    """The same params give the same tables byte for byte: the installed package's run, from another folder
    in another process, against the checkout's run (the ci run the first part shares)."""
    work = tmp_path / "elsewhere"
    (work / "params" / "regressions").mkdir(parents=True)
    shutil.copy(REPO / "params" / "ci.yaml", work / "params" / "ci.yaml")
    shutil.copy(REPO / "params" / "regressions" / "demo.csv", work / "params" / "regressions" / "demo.csv")
    where = subprocess.run([sys.executable, "-c", "import lookalike, lookalike.params as P; "
                            "print(lookalike.__file__); print(P.CHECKOUT); print(P.PROJECT_ROOT)"],
                           cwd=work, env=_env(installed), capture_output=True, text=True, check=True).stdout.split("\n")
    assert where[0].startswith(str(installed)) and where[1] == "None" and where[2] == str(work)
    done = subprocess.run([sys.executable, "-m", "lookalike", "run", "params/ci.yaml"], cwd=work, env=_env(installed),
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    run = work / "outputs" / "ci"
    for rel in ("index.html", "summary.html", "tables/headline.csv", "qrels/evidence.qrels",
                "notebooks/08_mined_candidates.ipynb"):
        assert (run / rel).is_file(), rel
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["git_revision"] == "installed package"
    tables = sorted((ci_run / "tables").glob("*.csv"))
    assert tables and sorted(p.name for p in (run / "tables").glob("*.csv")) == [p.name for p in tables]
    for table in tables:
        assert table.read_bytes() == (run / "tables" / table.name).read_bytes(), table.name
    assert manifest["corpus_fingerprint"] == json.loads((ci_run / "manifest.json").read_text())["corpus_fingerprint"]
    # the Python API of the installed copy reads the run it wrote, as the README shows
    code = ("import lookalike; r = lookalike.open_run('outputs/ci').compare(['recall@10', 'ndcg@10']); "
            "print(r.n_queries, len(r.systems))")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, env=_env(installed), capture_output=True, text=True,
                         check=True).stdout.split()
    assert int(out[0]) > 0 and int(out[1]) >= 2
