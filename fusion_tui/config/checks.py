"""Provides the cross-field checks of `server.endpoints` and `localModels.managed.rpc`.

Type checks live in the loader; these are the rules a type cannot say (one of `managed` or `url`,
unique labels, a variable NAME rather than a key, `host:port`). Each failure names the offending
key so the loader can report it with the file's line and column.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from fusion_tui.config.settings import EndpointSettings, Settings
from fusion_tui.config.speculative import SpeculativeError, parse_setting

MANAGED_LABEL = "here"
"""The label of the managed endpoint when the config gives none."""
MAX_LABEL = 40
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RPC_RE = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):([0-9]{1,5})$")


class CheckError(Exception):
    """A rule broken at `path` (config-file names; list indexes as digit strings)."""

    def __init__(self, path: tuple[str, ...], reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


def default_label(entry: EndpointSettings) -> str:
    """The label an entry gets when it names none: `here`, or the URL's host:port."""
    if entry.label:
        return entry.label
    if entry.managed or not entry.url:
        return MANAGED_LABEL
    parts = urlsplit(entry.url)
    return parts.netloc or entry.url


def check_settings(settings: Settings) -> None:
    """Raise `CheckError` for the first broken rule."""
    server = settings.server
    base = ("server", "endpoints")
    if server.endpoints and server.url:
        raise CheckError(
            ("server", "url"),
            "server.url and server.endpoints are both set: list the URL under server.endpoints "
            "(url: ...) and remove server.url",
        )
    seen: dict[str, int] = {}
    managed_at: int | None = None
    for i, entry in enumerate(server.endpoints):
        here = (*base, str(i))
        _check_entry(entry, here)
        if entry.managed:
            if managed_at is not None:
                raise CheckError(
                    (*here, "managed"),
                    f"only one endpoint can be the managed server (entry {managed_at} already is)",
                )
            managed_at = i
        label = default_label(entry)
        if label in seen:
            raise CheckError(
                (*here, "label") if entry.label else (*here, "url"),
                f"label {label!r} is used twice (entries {seen[label]} and {i}); "
                "give each endpoint its own label",
            )
        seen[label] = i
    _check_rpc(settings.local_models.managed.rpc)
    try:
        parse_setting(settings.local_models.managed.speculative)
    except SpeculativeError as exc:
        raise CheckError(("localModels", "managed", "speculative"), str(exc)) from None
    threads = settings.local_models.managed.threads
    if isinstance(threads, int) and threads < 1:
        raise CheckError(
            ("localModels", "managed", "threads"),
            f"should be auto or a number of threads of at least 1, not {threads}",
        )
    max_tokens = settings.agent.max_tokens
    if max_tokens is not None and max_tokens < 1:
        raise CheckError(
            ("agent", "maxTokens"),
            f"should be null (llm.maxTokens, at least 2048) or at least 1 token, not {max_tokens}",
        )


def _check_entry(entry: EndpointSettings, here: tuple[str, ...]) -> None:
    if entry.managed and entry.url:
        raise CheckError((*here, "url"), "an endpoint is either managed: true or a url:, not both")
    if not entry.managed and not entry.url:
        raise CheckError(here, "each endpoint needs managed: true or url: http://host:port")
    if entry.url:
        reason = url_problem(entry.url)
        if reason:
            raise CheckError((*here, "url"), reason)
    if entry.label is not None:
        label = entry.label
        if not label.strip() or len(label) > MAX_LABEL or not label.isprintable():
            raise CheckError(
                (*here, "label"),
                f"a label is 1 to {MAX_LABEL} printable characters, not {label!r}",
            )
    if entry.api_key_env is not None:
        if entry.managed:
            raise CheckError(
                (*here, "apiKeyEnv"),
                "the managed server listens on 127.0.0.1 without a key; apiKeyEnv is for "
                "url: entries",
            )
        if not ENV_NAME_RE.match(entry.api_key_env):
            raise CheckError(
                (*here, "apiKeyEnv"),
                "should be the NAME of an environment variable (letters, digits, _), not the key "
                "itself: put the key in that variable",
            )


def url_problem(url: str) -> str | None:
    """Why `url` is not a usable server base URL, or None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a valid URL ({exc}): write it like http://10.0.0.7:8080"
    if parts.scheme not in ("http", "https"):
        return f"should start with http:// or https://, not {url!r}"
    if not parts.hostname:
        return f"has no host: write it like http://10.0.0.7:8080, not {url!r}"
    if parts.username or parts.password:
        return (
            "must not carry credentials: name an environment variable in apiKeyEnv and put the "
            "key there"
        )
    if parts.query or parts.fragment:
        return "should be the server's base URL, without ?query or #fragment"
    if port == 0:
        return "port 0 is not a server's port"
    return None


def _check_rpc(rpc: tuple[str, ...]) -> None:
    path = ("localModels", "managed", "rpc")
    seen: set[str] = set()
    for i, item in enumerate(rpc):
        m = RPC_RE.match(item)
        if not m or not 0 < int(m.group(1)) < 65536:
            raise CheckError(
                (*path, str(i)),
                f"should be host:port of a ggml-rpc-server (e.g. 192.168.1.20:50052), not {item!r}",
            )
        if item in seen:
            raise CheckError((*path, str(i)), f"{item} is listed twice")
        seen.add(item)
