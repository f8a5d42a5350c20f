"""A fake llama-server *binary* that dies of a signal on cue, for the daemon's crash handling.

Run as `python crashing_server.py MODE STATE_DIR <llama-server argv...>` (tests write a small
executable wrapper, see `tests/unit/test_crash_recovery.py`). Every start appends its argv as one
JSON line to `STATE_DIR/starts.jsonl`. Modes:

- `ok`: serves (the in-process `FakeLlamaServer` on the `--port` it was given).
- `sigill-unless-no-repack`: dies of SIGILL while "warming up" unless `--no-repack` is passed.
- `sigill`: dies of SIGILL while warming up, every time.
- `sigill-after-health`: serves `/health`, then dies of SIGILL at the first completion unless
  `--no-repack` is passed (a crash after the model loaded).
- `sigill-after-probe`: serves `/health` and its first completion (the throughput probe), then
  dies of SIGILL at the next completion (a user's first request) unless `--no-repack` is passed.
- `sigsegv`, `sigbus`: die of that signal while loading the model.
- `sigkill`: kills itself with SIGKILL while loading.
- `loading`: answers 503 "Loading model" forever.
- `slow-probe`: serves, but every completion streams 64 tokens 0.3 s apart.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fakes.fake_server import FakeLlamaServer, Reply

SIGNALS = {"sigsegv": signal.SIGSEGV, "sigbus": signal.SIGBUS, "sigkill": signal.SIGKILL}


def die(sig: int) -> None:
    sys.stderr.flush()  # Python leaves SIGILL/SIGSEGV/SIGBUS at their default: the process dies
    os.kill(os.getpid(), sig)
    time.sleep(5)  # pragma: no cover - the signal ends us first


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class _SigillOnCompletion(FakeLlamaServer):
    async def _completion(self, *args: Any, **kwargs: Any) -> None:
        log("slot launch_slot_: id  0 | task 0 | processing task")
        die(signal.SIGILL)


class _SigillAfterProbe(FakeLlamaServer):
    completions = 0

    async def _completion(self, *args: Any, **kwargs: Any) -> None:
        self.completions += 1
        if self.completions > 1:
            log("slot launch_slot_: id  0 | task 1 | processing task")
            die(signal.SIGILL)
        await super()._completion(*args, **kwargs)


def main(argv: list[str]) -> int:
    mode, state, args = argv[0], Path(argv[1]), argv[2:]
    with (state / "starts.jsonl").open("a") as fh:
        fh.write(json.dumps(args) + "\n")
    repack_off = "--no-repack" in args or "-nr" in args
    port = int(args[args.index("--port") + 1])
    model = args[args.index("-m") + 1]
    log(f"main: loading model '{model}'")
    if mode in SIGNALS:
        die(SIGNALS[mode])
    log("common_init_from_params: warming up the model with an empty run - please wait ...")
    if mode == "sigill" or (mode == "sigill-unless-no-repack" and not repack_off):
        log("ggml_cpu: tinygemm_kernel_amx")
        die(signal.SIGILL)
    server_type: type[FakeLlamaServer] | None = None
    if mode == "sigill-after-health" and not repack_off:
        server_type = _SigillOnCompletion
    elif mode == "sigill-after-probe" and not repack_off:
        server_type = _SigillAfterProbe
    cls = server_type or FakeLlamaServer
    server = cls(total_slots=2, n_ctx=512, model_path=model, bind_port=port)
    server.loading = mode == "loading"
    if mode == "slow-probe":
        server.default_reply = Reply(text=["x"] * 64, chunk_delay=0.3)
    server.start()
    log("main: model loaded")
    log(f"main: server is listening on http://127.0.0.1:{port}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
