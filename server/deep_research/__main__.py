"""`python -m deep_research` is the `deep-research` command."""

from .cli import main

raise SystemExit(main())
