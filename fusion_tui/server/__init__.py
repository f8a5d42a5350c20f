"""llama-server itself: finding the binary, running the managed daemon, and talking to it.

The binary's lookup, the managed launch (pid file, launch record, start lock, adopt and stop,
the log), the start-up probe, crash diagnosis and remembered CPU quirks, and the HTTP client over
the server's endpoints (bounded transport, server-sent events, typed errors). It may import `fit`
(the allocation lines of the log), `paths` and `atomic`; never `sessions`,
`slots`, `chat`, `agent`, `tui` or `cli`, nor Textual or Rich.
"""
