"""Exposure: the managed server listens on 127.0.0.1 only, the app's files are private (0600),
and an external server's API key (from the environment) is never written anywhere by the app.

Both tests run one real turn so that every file the app writes in a session exists: the launch
record, the pid file, the probe, the server log and the session file.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from fusion_tui.chat.events import ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import ServerError, ServerHTTPError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.daemon import ManagedDaemon, free_port
from tests.fault.realserver import listening_addresses, small_settings, small_spec

pytestmark = pytest.mark.server

KEY = "fusion-test-key-0f3a9c7d21"


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def assert_key_nowhere(root: Path) -> None:
    leaks = [p for p in files_under(root) if KEY.encode() in p.read_bytes()]
    assert leaks == []


async def one_turn(backend: LocalBackend, text: str = "Say hi.") -> list[str]:
    await backend.start(lambda _s: None)
    try:
        return [e.outcome async for e in backend.reply(text) if isinstance(e, ReplyDone)]
    finally:
        await backend.close()


async def test_managed_server_binds_loopback_only_and_app_files_are_private(
    app_home: AppPaths,
    llama_server_bin: Path,
    demo_model: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FUSION_TUI_API_KEY", KEY)  # present, but managed mode must not use it
    daemon = ManagedDaemon(app_home, binary=llama_server_bin, poll_interval=0.05)
    try:
        record = await daemon.ensure(small_spec(demo_model))  # with the probe: probe.json too
        argv = record.argv
        assert argv.count("--host") == 1 and argv[argv.index("--host") + 1] == "127.0.0.1"
        assert listening_addresses(record.pid) == [("127.0.0.1", record.port)]
        assert record.url == f"http://127.0.0.1:{record.port}"

        backend = LocalBackend(small_settings(llama_server_bin, demo_model, max_tokens=8), app_home)
        assert await one_turn(backend) == ["completed"]

        written = {
            "pid file": daemon.files.pid_file,
            "launch record": daemon.files.record_file(record.pid),
            "probe": app_home.daemon_dir / "probe.json",
            "server log": daemon.log_path,
            "session": backend.store.path_for(backend.session.id),
        }
        modes = {name: stat.S_IMODE(p.stat().st_mode) for name, p in written.items()}
        assert modes == dict.fromkeys(written, 0o600)
        for folder in (app_home.daemon_dir, app_home.sessions_dir, app_home.log_dir):
            assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0, folder
        assert KEY not in " ".join(argv)
    finally:
        await daemon.stop()
    assert_key_nowhere(Path(os.environ["FUSION_TUI_HOME"]))


async def test_the_external_api_key_never_reaches_a_file_or_an_error(
    app_home: AppPaths,
    llama_server_bin: Path,
    demo_model: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    port = free_port()
    log = tmp_path / "external-server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                str(llama_server_bin),
                "-m",
                str(demo_model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "-np",
                "1",
                "-c",
                "1024",
                "-t",
                "2",
                "--no-ui",
                "--no-warmup",
                "-fit",
                "off",
                "--api-key",
                KEY,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        await _wait_health(url, server)
        base = small_settings(llama_server_bin, demo_model, max_tokens=8)
        settings: Settings = replace(base, server=replace(base.server, mode="external", url=url))

        monkeypatch.setenv("FUSION_TUI_API_KEY", KEY)
        backend = LocalBackend(settings, app_home)
        assert await one_turn(backend) == ["completed"]
        session_file = backend.store.path_for(backend.session.id)
        assert stat.S_IMODE(session_file.stat().st_mode) == 0o600

        monkeypatch.setenv("FUSION_TUI_API_KEY", KEY + "-wrong")
        with pytest.raises(ServerHTTPError) as info:
            await LocalBackend(settings, app_home).start(lambda _s: None)
        assert info.value.status == 401 and KEY not in str(info.value)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
    home = Path(os.environ["FUSION_TUI_HOME"])
    assert not app_home.daemon_dir.exists() or list(app_home.daemon_dir.iterdir()) == []
    assert files_under(home)  # the session was written, and holds no key
    assert_key_nowhere(home)


async def _wait_health(url: str, server: subprocess.Popen[bytes]) -> None:
    import anyio

    async with LlamaClient(url) as client:
        for _ in range(1200):
            if server.poll() is not None:
                pytest.fail(f"the external llama-server exited with {server.returncode}")
            try:
                await client.health()
                return
            except ServerError:
                await anyio.sleep(0.1)
    pytest.fail("the external llama-server did not become ready")
