"""`server.endpoints` and `localModels.managed.rpc`: their names, version-3 migration,
errors with file:line:column, and one endpoint (or none) meaning today's single server."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.config import ConfigError, load_settings
from fusion_tui.config.loader import settings_to_dict
from fusion_tui.config.migrations import migrate
from fusion_tui.config.settings import SCHEMA_VERSION, EndpointSettings, Settings
from fusion_tui.endpoints.model import Endpoint, default_endpoint, endpoints_from_settings

ISSUE_EXAMPLE = """\
version: 3
server:
  endpoints:
    - managed: true          # the local managed llama-server
      label: here
    - url: http://127.0.0.1:8081   # in real use, another machine's address
      label: gpu-box
      apiKeyEnv: GPU_BOX_KEY
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_the_issue_example_loads_with_its_names(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, ISSUE_EXAMPLE), env={})
    assert settings.server.endpoints == (
        EndpointSettings(managed=True, label="here"),
        EndpointSettings(url="http://127.0.0.1:8081", label="gpu-box", api_key_env="GPU_BOX_KEY"),
    )
    assert endpoints_from_settings(settings) == (
        Endpoint("here", None, True, None),
        Endpoint("gpu-box", "http://127.0.0.1:8081", False, "GPU_BOX_KEY"),
    )
    shown = settings_to_dict(settings)["server"]["endpoints"]
    assert shown[1] == {
        "managed": False, "url": "http://127.0.0.1:8081", "label": "gpu-box",
        "apiKeyEnv": "GPU_BOX_KEY",
    }  # fmt: skip


def test_a_version_2_file_migrates_additively_to_today_s_single_server(tmp_path: Path) -> None:
    v2 = "version: 2\nserver:\n  mode: external\n  url: http://10.0.0.7:8080\n"
    assert migrate({"version": 2, "server": {"mode": "external"}}) == {
        "version": SCHEMA_VERSION,
        "server": {"mode": "external", "endpoints": []},
        "localModels": {"managed": {"rpc": []}},
    }
    settings = load_settings(write(tmp_path, v2), env={})
    assert SCHEMA_VERSION == 3
    assert settings.server.endpoints == () and settings.local_models.managed.rpc == ()
    (only,) = endpoints_from_settings(settings)
    assert only == Endpoint("10.0.0.7:8080", "http://10.0.0.7:8080", False, "FUSION_TUI_API_KEY")
    assert load_settings(write(tmp_path, "version: 1\n"), env={}) == Settings()


def test_no_endpoints_is_the_managed_server_and_the_default() -> None:
    (only,) = endpoints_from_settings(Settings())
    assert only == Endpoint("here", None, True)
    second = Endpoint("b", "http://h:1")
    assert default_endpoint((second, only)) is only
    assert default_endpoint((second,)) is second


@pytest.mark.parametrize(
    ("yaml_text", "where", "words"),
    [
        ("    - label: x\n", ":4:7", "needs managed: true or url:"),
        ("    - managed: true\n      url: http://h:1\n", ":5:12", "not both"),
        ("    - url: ftp://h:1\n", ":4:12", "http:// or https://"),
        ("    - url: http://user:pw@h:1\n", ":4:12", "must not carry credentials"),
        ("    - url: http://h:1\n      apiKeyEnv: sk-live-12345\n", ":5:18", "NAME of an env"),
        ("    - managed: true\n    - managed: true\n", ":5:16", "only one endpoint"),
        ("    - url: http://a:1\n      label: x\n    - url: http://b:1\n      label: x\n",
         ":7:14", "label 'x' is used twice"),
        ("    - url: http://a:1\n    - url: http://a:1\n", ":5:12", "'a:1' is used twice"),
        ("    - managed: true\n      apiKeyEnv: K\n", ":5:18", "apiKeyEnv is for url"),
        ("    - http://a:1\n", ":4:7", "should be a mapping"),
        ("    - url: http://a:1\n      label: ''\n", ":5:14", "printable characters"),
    ],
)  # fmt: skip
def test_bad_endpoints_name_file_line_and_column(
    tmp_path: Path, yaml_text: str, where: str, words: str
) -> None:
    path = write(tmp_path, f"version: 3\nserver:\n  endpoints:\n{yaml_text}")
    with pytest.raises(ConfigError) as err:
        load_settings(path, env={})
    assert f"{path}{where}: server.endpoints[" in str(err.value)
    assert words in str(err.value)


def test_url_and_endpoints_together_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "server:\n  url: http://a:1\n  endpoints:\n    - managed: true\n")
    with pytest.raises(ConfigError, match=r":2:8: server.url: .*list the URL under"):
        load_settings(path, env={})


def test_rpc_is_a_list_of_host_port(tmp_path: Path) -> None:
    ok = "localModels:\n  managed:\n    rpc: [192.168.1.20:50052, 'box-b:50052', '[::1]:50052']\n"
    settings = load_settings(write(tmp_path, ok), env={})
    assert settings.local_models.managed.rpc == ("192.168.1.20:50052", "box-b:50052", "[::1]:50052")
    for bad, where in (
        ("[a:50052, nohost]", ":3:20"),
        ("[a:99999]", ":3:11"),
        ("[a:1, a:1]", ":3:16"),
    ):
        path = write(tmp_path, f"localModels:\n  managed:\n    rpc: {bad}\n")
        with pytest.raises(ConfigError, match=rf"{where}: localModels.managed.rpc\[\d\]: "):
            load_settings(path, env={})


def test_endpoints_from_the_environment(tmp_path: Path) -> None:
    env = {"FUSION_TUI_SERVER__ENDPOINTS": "[{managed: true}, {url: 'http://b:2', label: b}]"}
    settings = load_settings(tmp_path / "none.yaml", env=env)
    assert [e.label for e in endpoints_from_settings(settings)] == ["here", "b"]
