"""Writes tiny random-weight GGUF models that llama-server can load (test side, uses `gguf`).

Four families: `llama` (plain attention), `gemma3` (sliding layers with a small window), `lfm2`
(hybrid: short-conv layers marked by zero KV heads) and `mamba2` (pure recurrent). Tokenizer keys
are copied from the demo SmolLM2 file. Traps from ../shared/reference/llama-server.md §10:
`rope.dimension_count` must equal the head dim; conv kernels must be f32.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np

N_EMBD = 128
N_HEAD = 4
HEAD_DIM = 32  # divisible by 32 so quantised caches work with flash attention
N_FF = 256
CTX_TRAIN = 8192
TOKENIZER_KEYS = (
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
)  # fmt: skip

_TOKENIZER_CACHE: dict[Path, list[tuple[str, Any, Any, Any]]] = {}


def _tokenizer(source: Path) -> list[tuple[str, Any, Any, Any]]:
    """(key, value, type, sub_type) of the tokenizer fields of `source`, read with GGUFReader."""
    if source not in _TOKENIZER_CACHE:
        reader = gguf.GGUFReader(source)
        out = []
        for key in TOKENIZER_KEYS:
            field = reader.fields.get(key)
            if field is None:
                continue
            vtype = field.types[0]
            sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            out.append((key, field.contents(), vtype, sub))
        _TOKENIZER_CACHE[source] = out
    return _TOKENIZER_CACHE[source]


def _n_vocab(source: Path) -> int:
    for key, value, _, _ in _tokenizer(source):
        if key == "tokenizer.ggml.tokens":
            return len(value)
    raise ValueError("source model has no tokens")


class _Builder:
    def __init__(self, path: Path, arch: str, source: Path, seed: int) -> None:
        self.w = gguf.GGUFWriter(str(path), arch)
        self.arch = arch
        self.rng = np.random.default_rng(seed)
        self.n_vocab = _n_vocab(source)
        self.w.add_context_length(CTX_TRAIN)
        self.w.add_embedding_length(N_EMBD)
        self.w.add_file_type(1)
        for key, value, vtype, sub in _tokenizer(source):
            self.w.add_key_value(key, value, vtype, sub_type=sub)

    def t(self, name: str, *shape: int, f32: bool = False, value: float | None = None) -> None:
        """Add a tensor; `shape` in ggml order (ne0 first)."""
        np_shape = tuple(reversed(shape))
        if value is not None:
            arr = np.full(np_shape, value, dtype=np.float32)
        else:
            arr = (self.rng.standard_normal(np_shape) * 0.02).astype(np.float32)
        self.w.add_tensor(name, arr if f32 or len(shape) == 1 else arr.astype(np.float16))

    def key(self, suffix: str, value: Any, vtype: gguf.GGUFValueType) -> None:
        self.w.add_key_value(f"{self.arch}.{suffix}", value, vtype)

    def attn(self, i: int, n_head_kv: int, norms: bool = False) -> None:
        kv = n_head_kv * HEAD_DIM
        self.t(f"blk.{i}.attn_q.weight", N_EMBD, N_HEAD * HEAD_DIM)
        self.t(f"blk.{i}.attn_k.weight", N_EMBD, kv)
        self.t(f"blk.{i}.attn_v.weight", N_EMBD, kv)
        self.t(f"blk.{i}.attn_output.weight", N_HEAD * HEAD_DIM, N_EMBD)
        if norms:
            self.t(f"blk.{i}.attn_q_norm.weight", HEAD_DIM, value=1.0)
            self.t(f"blk.{i}.attn_k_norm.weight", HEAD_DIM, value=1.0)

    def ffn(self, i: int) -> None:
        self.t(f"blk.{i}.ffn_norm.weight", N_EMBD, value=1.0)
        self.t(f"blk.{i}.ffn_gate.weight", N_EMBD, N_FF)
        self.t(f"blk.{i}.ffn_up.weight", N_EMBD, N_FF)
        self.t(f"blk.{i}.ffn_down.weight", N_FF, N_EMBD)

    def finish(self) -> None:
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()


U32 = gguf.GGUFValueType.UINT32
F32 = gguf.GGUFValueType.FLOAT32


def _attn_keys(b: _Builder, n_layer: int, n_head_kv: int | list[int]) -> None:
    b.w.add_block_count(n_layer)
    b.w.add_feed_forward_length(N_FF)
    b.w.add_head_count(N_HEAD)
    b.w.add_head_count_kv(n_head_kv)
    b.w.add_key_length(HEAD_DIM)
    b.w.add_value_length(HEAD_DIM)
    b.w.add_rope_dimension_count(HEAD_DIM)
    b.w.add_rope_freq_base(10000.0)
    b.w.add_layer_norm_rms_eps(1e-6)


def write_llama(path: Path, source: Path, n_layer: int = 4, n_head_kv: int = 2) -> Path:
    b = _Builder(path, "llama", source, 1)
    _attn_keys(b, n_layer, n_head_kv)
    b.w.add_vocab_size(b.n_vocab)
    b.t("token_embd.weight", N_EMBD, b.n_vocab)
    b.t("output_norm.weight", N_EMBD, value=1.0)
    for i in range(n_layer):
        b.t(f"blk.{i}.attn_norm.weight", N_EMBD, value=1.0)
        b.attn(i, n_head_kv)
        b.ffn(i)
    b.finish()
    return path


def write_gemma3(
    path: Path, source: Path, n_layer: int = 6, window: int = 64, pattern: int = 3
) -> Path:
    """Sliding layers: il % pattern < pattern - 1 (with 6 layers and 3: layers 2 and 5 are full)."""
    b = _Builder(path, "gemma3", source, 2)
    _attn_keys(b, n_layer, 2)
    b.key("attention.sliding_window", window, U32)
    b.key("attention.sliding_window_pattern", pattern, U32)
    b.key("rope.freq_base_swa", 10000.0, F32)
    b.t("token_embd.weight", N_EMBD, b.n_vocab)
    b.t("output_norm.weight", N_EMBD, value=1.0)
    for i in range(n_layer):
        b.t(f"blk.{i}.attn_norm.weight", N_EMBD, value=1.0)
        b.attn(i, 2, norms=True)
        b.t(f"blk.{i}.post_attention_norm.weight", N_EMBD, value=1.0)
        b.ffn(i)
        b.t(f"blk.{i}.post_ffw_norm.weight", N_EMBD, value=1.0)
    b.finish()
    return path


def write_lfm2(
    path: Path, source: Path, kv_heads: tuple[int, ...] = (0, 0, 2, 0, 2), window: int = 0
) -> Path:
    """Hybrid: layers with 0 KV heads are short-conv (recurrent) layers; with a window, every
    attention layer slides."""
    l_cache = 3
    b = _Builder(path, "lfm2", source, 3)
    _attn_keys(b, len(kv_heads), list(kv_heads))
    b.key("shortconv.l_cache", l_cache, U32)
    if window:
        b.key("attention.sliding_window", window, U32)
    b.w.add_vocab_size(b.n_vocab)
    b.t("token_embd.weight", N_EMBD, b.n_vocab)
    b.t("token_embd_norm.weight", N_EMBD, value=1.0)
    for i, kv in enumerate(kv_heads):
        b.t(f"blk.{i}.attn_norm.weight", N_EMBD, value=1.0)
        if kv:
            b.attn(i, kv, norms=True)
        else:
            b.t(f"blk.{i}.shortconv.conv.weight", l_cache, N_EMBD, f32=True)
            b.t(f"blk.{i}.shortconv.in_proj.weight", N_EMBD, 3 * N_EMBD)
            b.t(f"blk.{i}.shortconv.out_proj.weight", N_EMBD, N_EMBD)
        b.ffn(i)
    b.finish()
    return path


def write_mamba2(path: Path, source: Path, n_layer: int = 3) -> Path:
    d_conv, d_inner, d_state, n_group, dt_rank = 4, 2 * N_EMBD, 16, 1, 4
    conv_dim = d_inner + 2 * n_group * d_state
    b = _Builder(path, "mamba2", source, 4)
    b.w.add_block_count(n_layer)
    b.key("ssm.conv_kernel", d_conv, U32)
    b.key("ssm.inner_size", d_inner, U32)
    b.key("ssm.state_size", d_state, U32)
    b.key("ssm.time_step_rank", dt_rank, U32)
    b.key("ssm.group_count", n_group, U32)
    b.w.add_layer_norm_rms_eps(1e-6)
    b.w.add_feed_forward_length(0)
    b.w.add_head_count(0)
    b.t("token_embd.weight", N_EMBD, b.n_vocab)
    b.t("output_norm.weight", N_EMBD, value=1.0)
    for i in range(n_layer):
        b.t(f"blk.{i}.attn_norm.weight", N_EMBD, value=1.0)
        b.t(f"blk.{i}.ssm_in.weight", N_EMBD, d_inner + conv_dim + dt_rank)
        b.t(f"blk.{i}.ssm_conv1d.weight", d_conv, conv_dim, f32=True)
        b.t(f"blk.{i}.ssm_conv1d.bias", conv_dim, f32=True)
        b.t(f"blk.{i}.ssm_dt.bias", dt_rank, f32=True)
        b.t(f"blk.{i}.ssm_a", 1, dt_rank, f32=True, value=-1.0)
        b.t(f"blk.{i}.ssm_d", 1, dt_rank, f32=True, value=1.0)
        b.t(f"blk.{i}.ssm_norm.weight", d_inner // n_group, n_group, f32=True, value=1.0)
        b.t(f"blk.{i}.ssm_out.weight", d_inner, N_EMBD)
    b.finish()
    return path


def write_lfm2_swa(path: Path, source: Path) -> Path:
    return write_lfm2(path, source, window=32)


WRITERS: dict[str, Callable[[Path, Path], Path]] = {
    "llama": write_llama,
    "gemma3": write_gemma3,
    "lfm2": write_lfm2,
    "lfm2swa": write_lfm2_swa,
    "mamba2": write_mamba2,
}


def write_all(directory: Path, source: Path) -> dict[str, Path]:
    """Write every tiny model into `directory`; returns arch → path."""
    directory.mkdir(parents=True, exist_ok=True)
    return {name: fn(directory / f"tiny-{name}.gguf", source) for name, fn in WRITERS.items()}


def _vtype(value: Any) -> gguf.GGUFValueType:
    if isinstance(value, bool):
        return gguf.GGUFValueType.BOOL
    if isinstance(value, int):
        return gguf.GGUFValueType.UINT32
    if isinstance(value, float):
        return gguf.GGUFValueType.FLOAT32
    if isinstance(value, str):
        return gguf.GGUFValueType.STRING
    return gguf.GGUFValueType.ARRAY


def write_metadata(path: Path, arch: str, kv: dict[str, Any]) -> Path:
    """A header-only GGUF (no tensors) with `general.architecture` = `arch` and `kv`.

    Keys starting with "." are prefixed with the architecture name. Ints are written as u32.
    """
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in kv.items():
        full = arch + key if key.startswith(".") else key
        w.add_key_value(full, value, _vtype(value))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    return path


HEADER_KV = {
    ".block_count": 6,
    ".context_length": 32768,
    ".embedding_length": 256,
    ".attention.head_count": 8,
    ".attention.head_count_kv": 2,
    "general.file_type": 15,
}
"""A small made-up model's header: 6 layers, 32k trained context, 8 heads over 2 KV heads."""


def write_header(path: Path, arch: str, **extra: Any) -> Path:
    """`write_metadata` of `HEADER_KV` changed by `extra`: `attention__sliding_window=512` sets
    `.attention.sliding_window`, a None value leaves the key out."""
    kv: dict[str, Any] = dict(HEADER_KV)
    for key, value in extra.items():
        kv["." + key.replace("__", ".")] = value
    return write_metadata(path, arch, {k: v for k, v in kv.items() if v is not None})


# --- launching the real server to read what it allocated (test and bench side) ---------------

LOAD_TIMEOUT_S = 90.0


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_kv_args(cfg: Any) -> list[str]:
    """llama-server flags for a `fusion_tui.fit.kv.KVConfig`."""
    args = ["-c", str(cfg.ctx), "-np", str(cfg.parallel), "-ub", str(cfg.ubatch)]
    args += ["-ctk", cfg.type_k, "-ctv", cfg.type_v, "-fa", "on" if cfg.flash_attn else "off"]
    args.append("--kv-unified" if cfg.unified else "--no-kv-unified")
    if cfg.swa_full:
        args.append("--swa-full")
    return args


def launch_and_read_log(binary: Path, model: Path, kv_args: list[str], log_path: Path) -> str:
    """Start llama-server at `-lv 4` on a free loopback port, wait until the context has created
    its memory (the compute buffers are reserved right after) or the process exits, kill it, and
    return its log."""
    import subprocess
    import time

    port = free_port()
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", "2",
           "-lv", "4", "--no-ui", "--no-warmup", *kv_args]  # fmt: skip
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + LOAD_TIMEOUT_S
            while time.monotonic() < deadline and proc.poll() is None:
                text = log_path.read_text(errors="replace")
                if any(m in text for m in ("compute buffer size", "model loaded", "listening on")):
                    break
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait(timeout=10)
    return log_path.read_text(errors="replace")
