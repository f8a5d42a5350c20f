"""Provides `sigill_after_serving`: did the managed server die of SIGILL once it was serving?

Some CPUs advertise instructions they trap on, and a natively built llama-server can come up,
pass its throughput probe, and die of SIGILL at the first real request (a larger batch reaches
another kernel). The launch and the probe recover from that themselves (`process.daemon`,
`connect`); this is the same recovery for a crash at a request: when the server this process
launched died of SIGILL with repacking on, repacking off is remembered for its binary and CPU
(`cpu_quirks`), so the relaunch the app makes right away starts it with `--no-repack`. A server
already running with repacking off is never relaunched for it: the recovery happens once.
"""

from __future__ import annotations

import signal
from pathlib import Path

from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, make_daemon
from fusion_tui.server.process import crash

REASON = f"llama-server died of SIGILL at a request {crash.AFTER_LOAD}"


async def sigill_after_serving(
    settings: Settings, paths: AppPaths, conn: Connection | None, wait: float = 3.0
) -> bool:
    """True (and repacking off remembered) when `conn`'s server, launched by this process with
    repacking on, is gone and died of SIGILL; `wait` s for a process that just dropped its
    connection to finish exiting."""
    record = conn.record if conn is not None else None
    if conn is None or record is None or not conn.launched or record.repack_off:
        return False
    daemon = make_daemon(settings, paths)
    if await daemon.exit_signal(record.pid, wait) != signal.SIGILL:
        return False
    daemon.quirks.remember_repack_off(Path(record.binary), REASON)
    return True
