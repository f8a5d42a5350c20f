"""Provides `parse_allocated_kv_bytes`: what llama-server says it allocated for KV and state.

(Stub: the measured-context work fills this in.)
"""

from __future__ import annotations


def parse_allocated_kv_bytes(log_text: str) -> int | None:
    """Sum of `llama_kv_cache: size = … MiB` and `llama_memory_recurrent: size = … MiB` lines
    of the last model load in `log_text`, in bytes; None when the log has no such line."""
    return None
