"""fusion-tui: coding sessions with a local llama-server that keep the KV cache warm.

The packages, from the shell down: `cli` (the commands), `tui` (the Textual app), `chat` (the seam
the screens talk to), `agent` (the coding agent), then the core: `sessions`, `slots`, `endpoints`,
`server`, `fit`, `gguf`, `config` and the few top-level modules everything uses. Imports point down
only, and nothing below `tui` imports Textual or Rich: the contracts are in pyproject.toml
(`[tool.importlinter]`, checked by `lint-imports`), the map in docs/architecture.md.
"""

__version__ = "0.1.0"
