"""Provides `EndpointRegistry`: one `LlamaClient` per endpoint, built on first use.

Each client carries only its own endpoint's key and talks only to its own base URL (redirects are
never followed, so a key cannot be forwarded to another host). The key is read from the
environment when the client is built and again on each `client()` call, so a key set or rotated
while the app runs is picked up; it is never part of a repr, a log line or a file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping

from fusion_tui.endpoints.model import Endpoint, default_endpoint
from fusion_tui.server.http.client import LlamaClient

ClientFactory = Callable[[str, str | None], LlamaClient]


class UnknownEndpoint(KeyError):
    """No endpoint has this label."""


class EndpointNotReady(RuntimeError):
    """The endpoint has no URL yet (the managed server is not running)."""


def _default_factory(url: str, api_key: str | None) -> LlamaClient:
    return LlamaClient(url, api_key=api_key)


class EndpointRegistry:
    """The app's endpoints by label, and a client for each."""

    def __init__(
        self,
        endpoints: Iterable[Endpoint],
        *,
        env: Mapping[str, str] | None = None,
        client_factory: ClientFactory = _default_factory,
    ) -> None:
        self._endpoints: dict[str, Endpoint] = {}
        for ep in endpoints:
            if ep.label in self._endpoints:
                raise ValueError(f"two endpoints are labelled {ep.label!r}")
            self._endpoints[ep.label] = ep
        if not self._endpoints:
            raise ValueError("at least one endpoint is needed")
        self._env = env
        self._factory = client_factory
        self._clients: dict[str, tuple[LlamaClient, str]] = {}
        self._stale: list[LlamaClient] = []

    def __repr__(self) -> str:
        return f"EndpointRegistry({', '.join(self._endpoints)})"

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(self._endpoints.values())

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self._endpoints)

    @property
    def default(self) -> Endpoint:
        return default_endpoint(self.endpoints)

    def get(self, label: str | None) -> Endpoint:
        """The endpoint labelled `label`; None means the default (managed, else first)."""
        if label is None:
            return self.default
        try:
            return self._endpoints[label]
        except KeyError:
            known = ", ".join(self._endpoints)
            raise UnknownEndpoint(f"no endpoint is labelled {label!r} (known: {known})") from None

    def bind(self, label: str, url: str) -> Endpoint:
        """Set the URL of `label` (the managed server once launched or adopted); a client for
        an older URL is dropped (call `aclose_stale` or `aclose` to close it)."""
        ep = self.get(label).bound(url)
        self._endpoints[label] = ep
        return ep

    def client(self, label: str | None = None) -> LlamaClient:
        """The client for `label`, rebuilt when its URL or key changed since the last call."""
        ep = self.get(label)
        if ep.url is None:
            raise EndpointNotReady(f"endpoint {ep.label!r} has no address yet (not launched)")
        key = ep.api_key(self._env)
        stamp = _stamp(ep.url, key)
        held = self._clients.get(ep.label)
        if held is not None and held[1] == stamp:
            return held[0]
        client = self._factory(ep.url, key)
        self._clients[ep.label] = (client, stamp)
        if held is not None:
            self._stale.append(held[0])
        return client

    async def aclose(self) -> None:
        clients = [c for c, _ in self._clients.values()] + self._stale
        self._clients.clear()
        self._stale = []
        for client in clients:
            await client.aclose()


def _stamp(url: str, key: str | None) -> str:
    """Identifies (url, key) without keeping the key in a second place in clear."""
    digest = hashlib.sha256((key or "").encode()).hexdigest()[:16] if key else "-"
    return f"{url}|{digest}"
