"""llama-server itself: talking to it (`http/`) and running the managed one (`process/`).

`http/` is the client over the server's endpoints (bounded transport, server-sent events);
`process/` finds the binary and launches, probes, adopts, stops and diagnoses the managed daemon,
using `http/` to reach it. Beside them, what both and everything above share: `errors.py` (the
typed `ServerError`s, each with a sentence for the user) and `types.py` (the server's answers,
parsed defensively). It may import `fit` (the allocation lines of the log), `paths` and
`atomic`; never `sessions`, `slots`, `chat`, `agent`, `tui` or `cli`, nor Textual or Rich.
"""
