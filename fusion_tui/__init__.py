"""fusion-tui: coding sessions with a local llama-server that keep the KV cache warm."""

__version__ = "0.1.0"
