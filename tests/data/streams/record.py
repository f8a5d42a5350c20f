"""Record raw llama-server answers for the client's replay tests.

Usage: `.venv/bin/python tests/data/streams/record.py` (needs llama-server and the demo model).
Starts its own server on a free loopback port (SmolLM2, `-np 2 -c 1024 -t 2`), sends each request
below, and writes for every case `<name>.body` (the raw response bytes, exactly as received) and
`<name>.meta.json` (path, request body, status, content type). The server is always stopped.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from fusion_tui.models.demo import demo_model_path  # noqa: E402
from fusion_tui.server.process.binary import find_llama_server  # noqa: E402
from fusion_tui.server.process.launch import LaunchSpec  # noqa: E402

LONG = " ".join(f"word{i}" for i in range(900))
CASES: list[tuple[str, str, str, dict[str, Any] | None]] = [
    ("health", "GET", "/health", None),
    ("props", "GET", "/props", None),
    ("tokenize", "POST", "/tokenize", {"content": "Hello world, this is a test."}),
    (
        "native_completion",
        "POST",
        "/completion",
        {"prompt": "The capital of France is", "n_predict": 12, "temperature": 0, "stream": True},
    ),
    ("slots_after", "GET", "/slots", None),
    (
        "native_progress",
        "POST",
        "/completion",
        {
            "prompt": "Count: " + " ".join(str(i) for i in range(100)),
            "n_predict": 4,
            "temperature": 0,
            "stream": True,
            "return_progress": True,
            "cache_prompt": False,
        },
    ),
    (
        "chat",
        "POST",
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "Say hello in one short sentence."}],
            "max_tokens": 16,
            "temperature": 0,
            "stream": True,
            "verbose": True,
        },
    ),
    (
        "chat_progress_usage",
        "POST",
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "Name three colours."}],
            "max_tokens": 8,
            "temperature": 0,
            "stream": True,
            "verbose": True,
            "return_progress": True,
            "stream_options": {"include_usage": True},
        },
    ),
    (
        "context_exceeded",
        "POST",
        "/completion",
        {"prompt": LONG, "n_predict": 4, "stream": True},
    ),
    (
        "chat_context_exceeded",
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": LONG}], "stream": True, "verbose": True},
    ),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    model = demo_model_path()
    if model is None:
        print("demo model missing", file=sys.stderr)
        return 1
    port = _free_port()
    spec = LaunchSpec(model=model, parallel=2, ctx=1024, threads=2)
    argv = spec.argv(find_llama_server(), port)
    log = tempfile.NamedTemporaryFile(prefix="record-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=60, trust_env=False) as http:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if http.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    print(Path(log.name).read_text()[-3000:], file=sys.stderr)
                    return 1
                time.sleep(0.2)
        for name, method, path, body in CASES:
            # a fresh connection per case: after a stream the server may close the kept-alive one
            with (
                httpx.Client(base_url=base, timeout=60, trust_env=False) as fresh,
                fresh.stream(method, path, json=body) as response,
            ):
                raw = b"".join(response.iter_raw())
                meta = {
                    "method": method,
                    "path": path,
                    "request": body,
                    "status": response.status_code,
                    "content_type": response.headers.get("content-type", ""),
                }
            (HERE / f"{name}.body").write_bytes(raw)
            (HERE / f"{name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
            print(f"{name}: {response.status_code}, {len(raw)} bytes")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
