"""Words for long made-up prompts (each with a number appended: about two SmolLM2 tokens), shared
by the real-server tests (`tests/server/real_backend.py`) and `bench/build_variants.py`."""

from __future__ import annotations

CODE_WORDS = (
    "parser",
    "lexer",
    "token",
    "buffer",
    "module",
    "import",
    "cache",
    "slot",
    "session",
    "prompt",
    "layer",
    "tensor",
)
