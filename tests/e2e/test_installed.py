"""lookalike installed as a package (not editable, not from the checkout) runs the whole report from
another folder: base.yaml and the stage notebooks travel inside the package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from lookalike.data import schema as corpus
from tests.conftest import installed_env

REPO = Path(__file__).resolve().parents[2]


def test_the_package_carries_its_schema_and_stages(installed):
    pkg = installed / "lookalike"
    assert (pkg / "base.yaml").is_file() and not (pkg / "base.yaml").is_symlink()
    assert sorted(p.name for p in (pkg / "notebooks").glob("*.ipynb")) == sorted(
        p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert list((pkg / "report" / "templates").glob("*.j2"))


def test_an_installed_lookalike_runs_the_ci_report_from_another_folder_to_the_same_tables(installed, ci_run, results):
    """The same params give the same tables byte for byte: the installed package's run through its runner
    (a kernel per stage), from another folder in another process — the session's ci run
    (tests/conftest.py) — against the checkout's stages called directly (the stage tests' results)."""
    work = ci_run.parents[1]
    where = subprocess.run([sys.executable, "-c", "import lookalike, lookalike.params as P; "
                            "print(lookalike.__file__); print(P.CHECKOUT); print(P.PROJECT_ROOT)"],
                           cwd=work, env=installed_env(installed), capture_output=True, text=True,
                           check=True).stdout.split("\n")
    assert where[0].startswith(str(installed)) and where[1] == "None" and where[2] == str(work)
    run = ci_run
    for rel in ("index.html", "summary.html", "tables/headline.csv", "qrels/evidence.qrels",
                "notebooks/08_mined_candidates.ipynb"):
        assert (run / rel).is_file(), rel
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["git_revision"] == "installed package"
    checkout = results[0].run_dir
    tables = sorted((checkout / "tables").glob("*.csv"))
    assert tables and sorted(p.name for p in (run / "tables").glob("*.csv")) == [p.name for p in tables]
    for table in tables:
        assert table.read_bytes() == (run / "tables" / table.name).read_bytes(), table.name
    for sub in ("runs", "runs_validated", "qrels", "vectors"):
        theirs = sorted(p.name for p in (checkout / sub).iterdir())
        assert theirs and theirs == sorted(p.name for p in (run / sub).iterdir()), sub
        for name in theirs:
            assert (checkout / sub / name).read_bytes() == (run / sub / name).read_bytes(), f"{sub}/{name}"
    units = pd.read_csv(checkout / "tables" / "units.csv", dtype=str, keep_default_na=False)
    assert manifest["corpus_fingerprint"] == corpus.fingerprint(units, checkout)
    # the Python API of the installed copy reads the run it wrote, as the README shows
    code = ("import lookalike; r = lookalike.open_run('outputs/ci').compare(['recall@10', 'ndcg@10']); "
            "print(r.n_queries, len(r.systems))")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, env=installed_env(installed), capture_output=True,
                         text=True, check=True).stdout.split()
    assert int(out[0]) > 0 and int(out[1]) >= 2
