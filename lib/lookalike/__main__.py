"""``python -m lookalike``: the command line (lookalike.cli)."""

from lookalike.cli import main

# guarded: a spawned worker process imports the main module again, and must not run the command twice
if __name__ == "__main__":
    raise SystemExit(main())
