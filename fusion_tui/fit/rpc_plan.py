"""Provides `rpc_launch_plan`: the managed launch plan when `localModels.managed.rpc` is set.

The devices and their free memory come from the server binary itself (`--list-devices` with the
configured `--rpc`), so the fit counts what llama.cpp will split over: the context is fitted to
the devices' memory together, then every device is checked for its own layers and KV cache.
"""

from __future__ import annotations

from collections.abc import Callable

from fusion_tui.config import Settings
from fusion_tui.fit.context import COMPUTE_RESERVE
from fusion_tui.fit.devices import Device, DeviceListError, DevicePlan, list_devices, plan_devices
from fusion_tui.fit.launch_plan import LaunchPlan
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.process.binary import find_llama_server

Lister = Callable[[str, tuple[str, ...]], list[Device]]


def _list(binary: str, rpc: tuple[str, ...]) -> list[Device]:
    return list_devices(binary, rpc)


def rpc_launch_plan(
    settings: Settings,
    plan_at: Callable[[int | None], LaunchPlan],
    *,
    lister: Lister = _list,
) -> tuple[LaunchPlan, DevicePlan]:
    """Plan with the devices' memory (unless `memoryBytes` is configured) and split it; a
    device that cannot hold its share is a `DaemonStartError` naming it."""
    managed = settings.local_models.managed
    binary = str(find_llama_server(settings.server.binary))
    try:
        devices = lister(binary, managed.rpc)
    except DeviceListError as exc:
        raise DaemonStartError(f"cannot launch over RPC: {exc}") from None
    if not devices:
        raise DaemonStartError(
            f"llama-server lists no devices for --rpc {','.join(managed.rpc)}; check that each "
            "ggml-rpc-server is running and reachable"
        )
    memory = managed.memory_bytes
    if memory is None:  # the KV budget is what the devices have free, less a reserve on each
        memory = sum(d.free_bytes for d in devices) - (len(devices) - 1) * COMPUTE_RESERVE
    plan = plan_at(max(0, memory))
    weights = plan.facts.file_size if plan.facts else plan.model_path.stat().st_size
    split = plan_devices(devices, plan.facts, plan.estimate, weights)
    if not split.fits:
        raise DaemonStartError(
            "the model does not fit the RPC devices:\n  " + "\n  ".join(split.lines())
        )
    return plan, split
