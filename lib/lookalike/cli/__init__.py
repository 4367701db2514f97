"""Command line: lookalike run PARAMS.yaml | check PARAMS.yaml | eval QRELS RUN [RUN ...] | leak-check PARAMS.yaml |
audit RUN_DIR | labels serve|export|import ... | example documents|photos [DIR]"""

from __future__ import annotations

import argparse
import sys


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, once installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lookalike")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def main(argv: list[str] | None = None) -> int:
    """``lookalike <command>``: dispatch to the subcommand named first; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "eval":
        from lookalike.cli.eval import main as eval_main

        return eval_main(argv[1:])
    if argv and argv[0] == "leak-check":
        from lookalike.cli.leak_check import main as leak_check_main

        return leak_check_main(argv[1:])
    if argv and argv[0] == "check":
        from lookalike.cli.check import main as check_main

        return check_main(argv[1:])
    if argv and argv[0] == "audit":
        from lookalike.cli.audit import main as audit_main

        return audit_main(argv[1:])
    if argv and argv[0] == "labels":
        from lookalike.cli.labels import main as labels_main

        return labels_main(argv[1:])
    parser = argparse.ArgumentParser(prog="lookalike", description="An honest evaluation workbench for visual retrievers.")
    parser.add_argument("--version", action="version", version=f"lookalike {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run the stage notebooks for a parameter file and build the report site")
    p_run.add_argument("params", help="a run file, e.g. params/demo.yaml (deep-merged over params/base.yaml)")
    p_run.add_argument("--out", default=None, help="output root (default: outputs/ in the repository)")
    p_run.add_argument("--stage", action="append", dest="stages", help="run only this stage (repeatable)")
    sub.add_parser("eval", help="trec_eval-style evaluation of a run against qrels (see lookalike eval -h)")
    sub.add_parser("leak-check", help="the leak ablation's CI gate (see lookalike leak-check -h)")
    sub.add_parser("check", help="read and validate every input a run would read, in seconds (see lookalike check -h)")
    sub.add_parser("audit", help="check a run's figures against the invariants (see lookalike audit -h)")
    sub.add_parser("labels", help="labels: import a labelling-page export, serve the team label server, export its labels (see lookalike labels -h)")
    p_ex = sub.add_parser("example", help="write a small generated corpus to try lookalike on: documents (PDFs, "
                                          "manifest, questions with answers, qrels) or photos (captions, questions, qrels)")
    p_ex.add_argument("name", choices=("documents", "photos"))
    p_ex.add_argument("dir", nargs="?", default=None,
                      help="where to write it (default examples/generated/NAME, where params/examples/ looks)")
    p_ex.add_argument("--seed", type=int, default=0, help="the generator's seed, 0 or more (default 0)")
    p_ex.add_argument("--force", action="store_true",
                      help="replace files in DIR that the example would write (listed first); without it a DIR "
                           "holding any of them is refused and nothing is written")
    args = parser.parse_args(argv)
    if args.command == "run":
        from lookalike.cli.run import main as run_main

        return run_main(args.params, args.out, args.stages)
    if args.command == "example":
        from pathlib import Path

        from lookalike import params
        from lookalike.data import examples

        folder = Path(args.dir) if args.dir else params.PROJECT_ROOT / "examples" / "generated" / args.name
        try:
            done = examples.write_example(args.name, folder, seed=args.seed, force=args.force)
        except examples.ExampleError as exc:
            print(f"lookalike example: {exc}", file=sys.stderr)
            return 2
        again = f" ({len(done.replaced)} of them replacing files already there)" if done.replaced else ""
        print(f"lookalike example: {args.name}: {len(done.files)} files written under {folder}{again}")
        return 0
    return 2
