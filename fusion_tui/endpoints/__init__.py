"""Several llama-servers for one app: endpoints, their clients, health and session placement.

An `Endpoint` per configured server (`server.endpoints`), a client each, a health watcher
(`/health`, `/props`, `/slots`, speeds), the pure placement policy, the sessions' (endpoint, slot)
pins, a prompt's fit against a slot, and the slot map's groups. With one endpoint the app is the
single-server app. It may import `config`, `server` and the top-level core modules;
never `sessions`, `slots`, `chat`, `agent`, `tui` or `cli`, nor Textual or Rich.
"""
