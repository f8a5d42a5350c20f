"""Provides the `localModels.managed.speculative` value: what it may say, read into `SpecSetting`.

The flags each value becomes and how `auto` decides live with the launch
(`fusion_tui/server/process/speculative.py`); the config checks a value with `parse_setting` when
the file is read, so a typo is refused there and then.
"""

from __future__ import annotations

from dataclasses import dataclass

OFF = "off"
AUTO = "auto"
DRAFT_PREFIX = "draft:"
NGRAM_TYPES = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")


class SpeculativeError(ValueError):
    """A `speculative` value that names nothing usable; the message says what would be."""


@dataclass(frozen=True)
class SpecSetting:
    """One parsed value: `kind` is off, auto, ngram or draft."""

    kind: str
    ngram: str = ""
    draft: str = ""
    """The draft model as written (short name or path)."""

    @property
    def text(self) -> str:
        if self.kind == "ngram":
            return self.ngram
        if self.kind == "draft":
            return DRAFT_PREFIX + self.draft
        return self.kind


def parse_setting(value: str | None) -> SpecSetting:
    """`auto`, `off`, an n-gram type or `draft:<model>`; `SpeculativeError` for anything else."""
    text = (value if value is not None else AUTO).strip()
    if text in (AUTO, OFF):
        return SpecSetting(text)
    if text in NGRAM_TYPES:
        return SpecSetting("ngram", ngram=text)
    if text.startswith(DRAFT_PREFIX):
        name = text[len(DRAFT_PREFIX) :].strip()
        if not name:
            raise SpeculativeError(
                "draft: needs a model after it, e.g. draft:coder-0.5b or draft:/path/small.gguf"
            )
        return SpecSetting("draft", draft=name)
    raise SpeculativeError(
        f"should be auto, off, one of {', '.join(NGRAM_TYPES)}, or draft:<model> "
        f"(a short model name or a GGUF path), not {text!r}"
    )
