"""gguf package."""
