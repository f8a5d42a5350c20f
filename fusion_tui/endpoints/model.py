"""Provides `Endpoint` and `endpoints_from_settings`: the servers one app talks to.

An endpoint is the managed local server or a remote URL. Its API key is never stored: the config
names an environment variable, and the key is read from it each time a client is built, so it
lives only in this process's memory and in the Authorization header sent to that endpoint.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fusion_tui.config import Settings
from fusion_tui.config.checks import MANAGED_LABEL, default_label
from fusion_tui.config.settings import EndpointSettings


@dataclass(frozen=True)
class Endpoint:
    """One llama-server: where it is, what it is called, and where its key comes from."""

    label: str
    url: str | None
    """Base URL; None for the managed server until it is launched or adopted (see `bind`)."""
    managed: bool = False
    api_key_env: str | None = None
    """The NAME of the environment variable holding the key (never the key itself)."""

    def api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """The key, read now from the environment; None when unset or empty."""
        if not self.api_key_env:
            return None
        return (os.environ if env is None else env).get(self.api_key_env) or None

    def bound(self, url: str) -> Endpoint:
        """This endpoint at `url` (the managed server's address once it runs)."""
        return replace(self, url=url.rstrip("/"))

    def to_json(self) -> dict[str, Any]:
        """Safe to print or log: the variable's name, never its value."""
        return {
            "label": self.label,
            "url": self.url,
            "managed": self.managed,
            "apiKeyEnv": self.api_key_env,
        }


def endpoint_from_entry(entry: EndpointSettings) -> Endpoint:
    url = None if entry.managed or not entry.url else entry.url.rstrip("/")
    return Endpoint(default_label(entry), url, entry.managed, entry.api_key_env)


def endpoints_from_settings(settings: Settings) -> tuple[Endpoint, ...]:
    """The configured endpoints in config order. Without `server.endpoints`, the one server
    `server.mode` describes: the managed server (label `here`) or `server.url` with the key
    variable `server.apiKeyEnv`, exactly as a single-server app used them."""
    server = settings.server
    if server.endpoints:
        return tuple(endpoint_from_entry(e) for e in server.endpoints)
    if server.mode == "external":
        url = server.url.rstrip("/") if server.url else None
        label = default_label(EndpointSettings(url=url)) if url else "external"
        return (Endpoint(label, url, False, server.api_key_env),)
    return (Endpoint(MANAGED_LABEL, None, True),)


def remote_labels(settings: Settings) -> list[str]:
    """The labels of the configured remote (`url:`) endpoints; none without `server.endpoints`
    (a single external server is the single-server app, said as it always was)."""
    return [endpoint_from_entry(e).label for e in settings.server.endpoints if not e.managed]


def not_stopped(labels: Sequence[str]) -> str:
    """What stopping says of the remote endpoints it leaves alone (they are not ours to stop)."""
    if len(labels) == 1:
        return f"{labels[0]} is a remote endpoint: not stopped"
    return f"{', '.join(labels)} are remote endpoints: not stopped"


def default_endpoint(endpoints: tuple[Endpoint, ...]) -> Endpoint:
    """Where a session without an endpoint in its pin (an older file) belongs: the managed
    endpoint, else the first one."""
    for ep in endpoints:
        if ep.managed:
            return ep
    return endpoints[0]
