"""The model of llama-server's RAM prompt cache: who the server moved there, what still fits, and
when a returning session may ride it instead of a disk restore."""

from __future__ import annotations

from fusion_tui.slots.ram_cache import (
    MAX_MISS_S,
    RamCacheModel,
    cache_ram_bytes,
    ram_cache_for,
    rides_ram,
)

MIB = 1024 * 1024


def test_the_budget_comes_from_the_launch_arguments() -> None:
    assert cache_ram_bytes(["llama-server", "-m", "x.gguf"]) == 8192 * MIB  # the default
    assert cache_ram_bytes(["--cache-ram", "100"]) == 100 * MIB
    assert cache_ram_bytes(["-cram", "0"]) is None  # off
    assert cache_ram_bytes(["--cache-ram=-1"]) == -1  # unbounded
    assert cache_ram_bytes(["--cache-ram", "lots"]) is None  # unreadable: not trusted


def test_a_session_is_held_while_what_came_after_it_fits_half_the_budget() -> None:
    model = RamCacheModel(100 * MIB)
    model.pushed("a", 30 * MIB)
    model.pushed("b", 15 * MIB)
    assert model.holds("a") and model.holds("b")  # 45 of 50 MiB
    model.pushed("c", 10 * MIB)
    assert not model.holds("a") and model.holds("b")  # 55 MiB since a: maybe evicted
    assert not model.holds("never-pushed")
    model.loaded("b")  # back in a slot: no longer counted as in RAM
    assert not model.holds("b")
    model.pushed("a", 30 * MIB)  # moved again: the newest entry
    assert model.holds("a")


def test_one_miss_turns_the_model_off() -> None:
    model = RamCacheModel(-1)
    model.pushed("a", 10**12)
    assert model.holds("a")  # unbounded
    model.missed()
    model.pushed("a", 1)
    assert not model.holds("a") and not model.enabled


def test_a_ride_only_where_a_miss_is_a_short_re_read() -> None:
    model = RamCacheModel(100 * MIB)
    model.pushed("a", MIB)
    assert rides_ram(model, "a", n_tokens=500, rate=300.0)
    assert not rides_ram(model, "a", n_tokens=int(300 * MAX_MISS_S) + 300, rate=300.0)
    assert not rides_ram(model, "a", n_tokens=500, rate=None)  # no measured prompt speed yet
    assert not rides_ram(None, "a", n_tokens=500, rate=300.0)  # an external server, or off


def test_one_model_per_launch_and_none_for_unknown_or_off() -> None:
    first = ram_cache_for("launch-1", ["--cache-ram", "64"])
    assert first is not None and first is ram_cache_for("launch-1", [])
    assert ram_cache_for(None, []) is None
    assert ram_cache_for("launch-2", ["--cache-ram", "0"]) is None
