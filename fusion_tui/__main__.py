"""Provides `python -m fusion_tui`."""

from fusion_tui.cli import main

raise SystemExit(main())
