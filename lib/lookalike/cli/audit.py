"""lookalike audit RUN_DIR: check a run's figures against the invariants (lookalike.report.audit).

Exit 0 when every invariant holds, 1 with one line per violation (the invariant, the file, the
figure and what is wrong), 2 when the folder is not a run.
"""

from __future__ import annotations

import argparse
import sys

from lookalike import stages as stage_modules
from lookalike.report import audit
from lookalike.report import run_folder


def full(run_dir) -> list[audit.Violation]:
    """Every invariant of report.audit, and people's figures against the label database (judging sits
    above the report layer, so its check joins here)."""
    from pathlib import Path

    from lookalike.judging import team

    found = audit.audit(run_dir, list(stage_modules.STAGES))
    try:
        cfg = run_folder.run_config(Path(run_dir))
    except run_folder.ManifestError:
        return found                # said already, as 'readable'
    if cfg is None:
        return found                # no manifest: no label database named
    return found + [audit.Violation("people", file, figure, problem)
                    for file, figure, problem in team.check_run(run_dir, cfg)]


def main(argv: list[str] | None = None) -> int:
    """``lookalike audit RUN_DIR``: re-derive every checked figure and claim of a run folder; exit 1 on a
    violation."""
    parser = argparse.ArgumentParser(prog="lookalike audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run folder, e.g. outputs/demo")
    args = parser.parse_args(argv)
    from pathlib import Path

    folder = Path(args.run_dir)
    marks = ("manifest.json", "notebooks", "tables", "index.html", "summary.html")
    if folder.is_dir() and not any((folder / m).exists() for m in marks):
        # an empty folder, or someone's own: nothing to audit, which is not a run that broke its invariants
        print(f"lookalike audit: {folder} holds no lookalike run (none of {', '.join(marks)}): give a run folder "
              "such as outputs/demo", file=sys.stderr)
        return 2
    try:
        found = full(args.run_dir)
    except FileNotFoundError as exc:
        print(f"lookalike audit: {exc}", file=sys.stderr)
        return 2
    for v in found:
        print(v.line())
    derived, hashed = audit.coverage(folder)
    folders: dict[str, int] = {}
    for rel in hashed:
        top = rel.split("/")[0] if "/" in rel else rel
        folders[top] = folders.get(top, 0) + 1
    print(f"lookalike audit: {len(derived)} file(s) re-derived from others "
          f"({', '.join(sorted({r.split('/')[0] for r, _ in derived}))}); {len(hashed)} checked by their sha256 only "
          f"({', '.join(f'{k} {n}' for k, n in sorted(folders.items()))}): an edit to one of those with its hash "
          "rewritten in manifest.json is not caught", file=sys.stderr)
    invariants = sorted({v.invariant for v in found})
    print(f"lookalike audit: {args.run_dir}: " + (f"{len(found)} violation(s) of {', '.join(invariants)}" if found
                                                   else "every invariant holds"), file=sys.stderr)
    return 1 if found else 0
