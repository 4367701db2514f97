"""The set-up files: requirements.txt and environment.yml pin the same packages, and what they
install keeps process start-up cheap (every stage's kernel, the runner and every Ray worker start
a Python process)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
