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
    try:
        found = full(args.run_dir)
    except FileNotFoundError as exc:
        print(f"lookalike audit: {exc}", file=sys.stderr)
        return 2
    for v in found:
        print(v.line())
    invariants = sorted({v.invariant for v in found})
    print(f"lookalike audit: {args.run_dir}: " + (f"{len(found)} violation(s) of {', '.join(invariants)}" if found
                                                   else "every invariant holds"), file=sys.stderr)
    return 1 if found else 0
