"""`python -m bench`: see bench/run.py."""

from .run import main

raise SystemExit(main())
