"""Speculative decoding: what the setting accepts, the flags each choice becomes, how `auto`
decides from the trial's figures, where it keeps its verdict, and what the user is told."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from fusion_tui.config.loader import ConfigError, load_settings
from fusion_tui.config.speculative import SpeculativeError, parse_setting
from fusion_tui.paths import AppPaths
from fusion_tui.server.process import daemon as daemon_module
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec, LaunchSpecError
from fusion_tui.server.process.probe import ready_line
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.server.process.speculative import (
    SpecDecision,
    TrialRun,
    Verdicts,
    acceptance_from_metrics,
    acceptance_from_timings,
    decide,
    resolve_draft,
    spec_args,
    verdict_key,
)
from fusion_tui.server.types import Timings
from fusion_tui.status import Acceptance, ServerStatus


@pytest.mark.parametrize(
    ("value", "kind"),
    [("auto", "auto"), ("off", "off"), ("ngram-simple", "ngram"), ("ngram-mod", "ngram"),
     ("draft:coder-0.5b", "draft"), ("draft:/m/small.gguf", "draft"), (None, "auto")],
)  # fmt: skip
def test_every_documented_value_parses(value: str | None, kind: str) -> None:
    assert parse_setting(value).kind == kind


@pytest.mark.parametrize("value", ["on", "ngram", "draft:", "draft-simple", "eagle3", ""])
def test_a_value_that_names_nothing_says_what_would(value: str) -> None:
    with pytest.raises(SpeculativeError, match=r"auto|draft"):
        parse_setting(value)


def test_the_config_file_refuses_a_bad_value_and_names_the_setting(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("version: 3\nlocalModels:\n  managed:\n    speculative: fast\n")
    with pytest.raises(ConfigError, match=r"speculative.*should be auto, off"):
        load_settings(cfg, env={})


def test_the_default_is_auto(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "none.yaml", env={}).local_models.managed.speculative == "auto"


def test_a_draft_model_is_named_with_its_type_and_the_main_cache_types(tmp_path: Path) -> None:
    small = tmp_path / "small.gguf"
    small.write_bytes(b"GGUF")
    args = spec_args("draft", small, ("q8_0", "q8_0"))
    assert args[:2] == ["--spec-type", "draft-simple"]  # -md alone loads it but never drafts
    assert args[args.index("-md") + 1] == str(small.resolve())
    assert args[args.index("-ctkd") + 1] == "q8_0"
    assert "--spec-draft-n-max" in args


def test_an_ngram_type_gets_its_tuned_draft_lengths() -> None:
    args = spec_args("ngram-simple")
    assert args[:2] == ["--spec-type", "ngram-simple"]
    assert "--spec-ngram-simple-size-m" in args
    assert spec_args("off") == []


def test_a_draft_path_must_exist_and_a_short_name_must_be_known(tmp_path: Path) -> None:
    with pytest.raises(SpeculativeError, match="no file there"):
        resolve_draft(str(tmp_path / "missing.gguf"))
    with pytest.raises(SpeculativeError, match="not an installed model fusion-tui knows"):
        resolve_draft("coder-0.5b", lambda _name: None)
    small = tmp_path / "coder-0.5b.gguf"
    small.write_bytes(b"GGUF")
    assert resolve_draft("coder-0.5b", lambda name: tmp_path / f"{name}.gguf") == small


def test_launch_spec_adds_the_resolved_flags_unless_extra_args_set_their_own(
    tmp_path: Path,
) -> None:
    flags = tuple(spec_args("ngram-simple"))
    argv = LaunchSpec(model=tmp_path / "m.gguf", spec_args=flags).argv("s", 1, cores=2, environ={})
    assert argv[argv.index("--spec-type") + 1] == "ngram-simple"
    own = ("--spec-type", "ngram-mod")
    spec = LaunchSpec(model=tmp_path / "m.gguf", spec_args=flags, extra_args=own)
    argv = spec.argv("s", 1, cores=2, environ={})
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--spec-type"] == ["ngram-mod"]


def test_launch_spec_refuses_a_bad_setting(tmp_path: Path) -> None:
    with pytest.raises(LaunchSpecError, match="speculative"):
        LaunchSpec(model=tmp_path / "m.gguf", speculative="fast").validate()


def run(choice: str, copy: float, free: float, edit: float = 10.0) -> TrialRun:
    return TrialRun(choice, copy, free, 100, 60, edit)


def test_auto_turns_on_what_is_faster_at_copying_and_no_slower_at_writing() -> None:
    choice, reason = decide([run("off", 10.0, 10.0), run("ngram-simple", 12.0, 9.9)])
    assert choice == "ngram-simple"
    assert reason == "1.20× copying, 1.00× editing, 0.99× writing"


def test_auto_stays_off_when_drafting_costs_free_writing() -> None:
    choice, reason = decide([run("off", 10.0, 10.0), run("ngram-simple", 13.0, 9.0)])
    assert choice == "off"
    assert "0.90× writing: not faster here" in reason


def test_auto_stays_off_when_drafting_costs_edits() -> None:
    choice, reason = decide([run("off", 10.0, 10.0), run("ngram-simple", 14.0, 10.0, edit=6.5)])
    assert choice == "off"
    assert reason == "ngram-simple 1.40× copying, 0.65× editing, 1.00× writing: not faster here"


def test_auto_stays_off_for_a_gain_within_noise() -> None:
    assert decide([run("off", 10.0, 10.0), run("ngram-mod", 10.3, 10.0)])[0] == "off"


def test_auto_picks_the_fastest_of_several_that_pay() -> None:
    trial = [run("off", 10, 10), run("ngram-simple", 12, 10), run("ngram-mod", 14, 10)]
    assert decide(trial)[0] == "ngram-mod"


def test_verdicts_are_kept_per_model_file_and_read_back(tmp_path: Path) -> None:
    model, other, binary = tmp_path / "a.gguf", tmp_path / "b.gguf", tmp_path / "llama-server"
    for p in (model, other, binary):
        p.write_bytes(b"x")
    key = verdict_key(model, binary, "cpu", 2, "-t 1", "")
    assert key != verdict_key(other, binary, "cpu", 2, "-t 1", "")
    assert key != verdict_key(model, binary, "cpu", 2, "-t 2", "")
    assert key != verdict_key(model, binary, "another cpu", 2, "-t 1", "")
    args = ("--spec-type", "ngram-simple")
    trial = (run("off", 10, 10),)
    decision = SpecDecision("auto", "ngram-simple", "1.20×", args, trial=trial, load="0.50")
    Verdicts(tmp_path / "d").put(key, decision)
    assert Verdicts(tmp_path / "d").get(key) == decision
    assert Verdicts(tmp_path / "d").get("nope") is None
    (tmp_path / "d" / "speculative.json").write_text("{torn")
    assert Verdicts(tmp_path / "d").get(key) is None


def test_acceptance_is_read_from_the_timings_and_from_metrics() -> None:
    assert acceptance_from_timings({"draft_n": 40, "draft_n_accepted": 30}) == (40, 30)
    assert acceptance_from_timings({"predicted_n": 5}) is None
    text = (
        "# HELP llamacpp:spec_decode_num_draft_tokens_total x\n"
        "llamacpp:spec_decode_num_draft_tokens_total 1200\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 569\n"
    )
    assert acceptance_from_metrics(text) == (1200, 569)
    assert Timings.from_json({"draft_n": 8, "draft_n_accepted": 6}).draft_n_accepted == 6


def record(speculative: dict[str, object] | None) -> LaunchRecord:
    return LaunchRecord(
        pid=1, argv=["s"], model_path="/m/coder-1.5b.Q4_K_M.gguf", host="127.0.0.1", port=1,
        url="http://127.0.0.1:1", started_at=0.0, ctx=8192, parallel=2, log_path="l",
        n_ctx_slot=4096, speculative=speculative,
    )  # fmt: skip


def test_the_ready_line_says_what_auto_chose_and_why() -> None:
    on = SpecDecision("auto", "ngram-simple", "1.20× copying, 1.00× writing")
    assert ready_line(record(on.to_json()), None).endswith(
        "· speculative ngram-simple (auto: 1.20× copying, 1.00× writing)"
    )
    off = SpecDecision("auto", "off", "ngram-simple 1.01× copying, 0.98× writing: not faster here")
    assert "speculative off (auto: ngram-simple 1.01× copying" in ready_line(
        record(off.to_json()), None
    )
    configured_off = SpecDecision("off", "off", "configured off")
    assert "speculative" not in ready_line(record(configured_off.to_json()), None)
    assert "speculative" not in ready_line(record(None), None)


def test_the_status_line_shows_the_acceptance_when_drafting() -> None:
    rates = Acceptance()
    rates.add(0, 0)
    assert rates.rate is None
    assert rates.add(100, 60) == pytest.approx(0.6)
    status = ServerStatus("ready", "coder", 2, 4096, speculative="ngram-simple", acceptance=0.6)
    assert "ngram-simple 60% accepted" in status.summary()
    assert "speculative" not in ServerStatus("ready", "coder", 2, 4096).summary()


def test_a_bare_off_in_yaml_is_the_word_off(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("version: 3\nlocalModels:\n  managed:\n    speculative: off\n")
    assert load_settings(cfg, env={}).local_models.managed.speculative == "off"
    cfg.write_text("version: 3\nlocalModels:\n  managed:\n    speculative: on\n")
    with pytest.raises(ConfigError, match="not 'on'"):
        load_settings(cfg, env={})


def test_auto_over_rpc_stays_off_without_a_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ggml-rpc-server serves one client at a time: trial servers side by side would queue on
    it, and the launch after them found it gone."""

    async def no_trial(*_: object) -> list[TrialRun]:
        raise AssertionError("the trial ran over RPC")

    monkeypatch.setattr(daemon_module, "run_trial", no_trial)
    paths = AppPaths.default(env={"FUSION_TUI_HOME": str(tmp_path)})
    spec = LaunchSpec(model=tmp_path / "m.gguf", parallel=1, ctx=1024, speculative="auto",
                      rpc=("127.0.0.1:50052",))  # fmt: skip
    daemon = ManagedDaemon(paths, binary=tmp_path / "llama-server")
    resolved, decision = anyio.run(
        lambda: daemon.resolve_speculative(spec, tmp_path / "llama-server", lambda _: None)
    )
    assert resolved.spec_args == () and decision.choice == "off"
    assert "RPC" in decision.reason
