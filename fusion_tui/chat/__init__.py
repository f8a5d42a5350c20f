"""Provides the chat backend: what a UI (or the headless CLI) talks to for one session.

The seam between the screens and the core: the typed `Backend` protocol, its two backends (the
plain chat, `local.py`, and agent mode, `agent_backend.py`), the one factory that builds them,
with compaction, titles and several endpoints. The slot policy they share is `slots.keeper`.
It may import the agent and the core (`sessions`, `slots`, `endpoints`, `server`, `config`,
top-level modules); never `fusion_tui.tui` or `fusion_tui.cli`, nor Textual or Rich.
"""
