from lookalike.cli import main

raise SystemExit(main())
