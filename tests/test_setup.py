"""The set-up files: requirements.txt and environment.yml pin the same packages, and what they
install keeps process start-up cheap (every stage's kernel, the runner and every Ray worker start
a Python process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+(?:\[[^\]]+\])?)==(\S+)$")


def _pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        m = PIN.match(line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_requirements_and_environment_pin_the_same_versions():
    pip = _pins((ROOT / "requirements.txt").read_text().splitlines())
    pip.update(_pins((ROOT / "constraints-torch.txt").read_text().splitlines()))
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    conda = _pins(conda_pip)
    assert pip, "no pins read from requirements.txt"
    assert conda == pip, (f"only in requirements: {sorted(set(pip) - set(conda))}, only in environment.yml: "
                          f"{sorted(set(conda) - set(pip))}, different: "
                          f"{sorted(k for k in set(pip) & set(conda) if pip[k] != conda[k])}")


def test_importing_jsonschema_builds_no_grammar():
    """jsonschema >= 4.25 with rfc3987-syntax installed (jupyter-events' format-nongpl extra) builds a
    Lark grammar on import, about 1 s in every process; requirements.txt pins jsonschema below it."""
    code = "import sys, jsonschema, ray; print(sorted(m for m in sys.modules if m.startswith(('rfc3987_syntax', 'lark'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"importing jsonschema and ray loaded {out.strip()}"


def _setup_recipe() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("$(STAMP):", 1)[1].split("\ntouch", 1)[0]
    return [line.strip() for line in recipe.splitlines() if "pip install" in line]


def test_setup_installs_colpali_last_so_pip_prints_no_known_conflict():
    """pip printed a red ERROR on every fresh set-up (colpali-engine caps torch below the pinned one):
    colpali-engine now goes in after the requirements, without dependencies and conflict warnings."""
    steps = _setup_recipe()
    colpali = next(i for i, s in enumerate(steps) if "colpali-engine==" in s)
    requirements = next(i for i, s in enumerate(steps) if "-r requirements.txt" in s)
    assert requirements < colpali, steps
    assert "--no-deps" in steps[colpali] and "--no-warn-conflicts" in steps[colpali]
    assert not any("--no-warn-conflicts" in s for i, s in enumerate(steps) if i != colpali), \
        "only the known colpali conflict may be silenced"


def test_setup_without_root_names_what_is_missing_and_how_to_skip_it(tmp_path):
    """Off Debian or without root, make setup used to run apt-get and fail; it now names the packages."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "dpkg").write_text("#!/bin/sh\nexit 1\n")          # nothing is installed
    (fake_bin / "id").write_text("#!/bin/sh\necho 1000\n")         # not root
    for f in fake_bin.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"}
    res = subprocess.run(["make", "setup", "VENV=" + str(tmp_path / "venv")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and not (tmp_path / "venv").exists(), res.stdout + res.stderr   # stops before pip
    assert "missing Debian packages: tesseract-ocr" in res.stdout and "make setup APT_PACKAGES=" in res.stdout


def test_the_license_is_shipped_and_named():
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    project = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


def test_lookalike_says_its_version():
    res = subprocess.run([sys.executable, "-m", "lookalike", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0 and re.fullmatch(r"lookalike \d+\.\d+\.\d+\n", res.stdout), res.stdout + res.stderr


@pytest.mark.slow
def test_a_stage_prints_no_kernel_warning(tmp_path):
    """Every stage printed ipykernel's '[IPKernelApp] WARNING | Kernel is running over TCP without
    encryption' on the terminal; the stage kernels now log at ERROR."""
    res = subprocess.run([sys.executable, "-m", "lookalike", "run", "params/ci.yaml", "--out", str(tmp_path),
                          "--stage", "01_stratify_corpus"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "stage 01_stratify_corpus done" in res.stdout + res.stderr
    assert "IPKernelApp" not in res.stdout + res.stderr and "without encryption" not in res.stdout + res.stderr
