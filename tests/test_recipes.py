"""The recipes of docs/development.md, each tried on a fresh copy of the checkout: its '# file:' blocks
written, its '# append:' blocks appended, its '$' lines run from the copy's root — every one must succeed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO, copy_of_checkout

DOC = REPO / "docs" / "development.md"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def recipes() -> dict[str, list[tuple[str, str]]]:
    """Recipe title -> its fenced blocks (language, body), in order."""
    text = DOC.read_text(encoding="utf-8").split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for part in text.split("\n### ")[1:]:
        title, _, body = part.partition("\n")
        out[title.strip()] = [(lang, block) for lang, block in FENCE.findall(body)]
    return out


def test_the_recipes_are_there_and_each_names_what_it_writes_and_runs():
    found = recipes()
    assert list(found) == ["Adding an encoder with settings", "Adding a judge", "Adding a corpus source"]
    for title, blocks in found.items():
        assert any(b.startswith(("# file:", "# append:")) for _, b in blocks), title
        assert any(lang == "console" for lang, _ in blocks), title


@pytest.mark.slow
@pytest.mark.parametrize("title", list(recipes()))
def test_a_recipe_works_on_a_fresh_copy(title, tmp_path):
    copy = copy_of_checkout(tmp_path / "checkout")
    env = dict(os.environ, PYTHONPATH=str(copy / "lib"), LOOKALIKE_CACHE=str(tmp_path / "cache"))
    env.pop("LOOKALIKE_PROJECT_ROOT", None)
    ran = 0
    for lang, body in recipes()[title]:
        first, _, rest = body.partition("\n")
        if first.startswith("# file:"):
            target = copy / first.split(":", 1)[1].strip()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(rest, encoding="utf-8")
        elif first.startswith("# append:"):
            target = copy / first.split(":", 1)[1].strip()
            assert target.is_file(), f"{title}: appends to {target.relative_to(copy)}, which is not in the checkout"
            target.write_text(target.read_text(encoding="utf-8") + "\n\n" + rest, encoding="utf-8")
        elif lang == "console":
            for line in body.splitlines():
                if not line.startswith("$ "):
                    continue
                argv = shlex.split(line[2:])
                argv[0] = sys.executable if argv[0] == "python" else argv[0]
                done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, f"{title}: {line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
                ran += 1
    assert ran, title
    # the copy is a fresh one: the real checkout was not touched
    assert not (REPO / "recipes").exists()
