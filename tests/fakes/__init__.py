"""Test doubles shared by helpers: a virtual clock and a scriptable fake llama-server."""
