"""llama-server itself: talking to it (`http/`) and running the managed one (`process/`).

`http/` is the client over the server's endpoints (bounded transport, server-sent events);
`process/` finds the binary and launches, probes, adopts, stops and diagnoses the managed daemon,
using `http/` to reach it. Beside them, what both and everything above share: `errors.py` (the
typed `ServerError`s, each with a sentence for the user) and `types.py` (the server's answers,
parsed defensively); and over them `connect.py`, from settings to a ready `Connection` (the model
resolved, the launch planned, the daemon adopted or launched; `release` and `stops_on_exit`, the
one rule for stopping it), with `launch_choice.py` (what the launch wizard calls) and
`sigill_recovery.py` (a SIGILL at a request: repacking off remembered for the relaunch), and
`template.py`, the model's chat template as a frame (probed once per daemon), on which the chat
and the agent build their prompts. It may
import `config`, `gguf`, `fit`, `models`, `status`, `paths` and `atomic`; never `sessions`,
`slots`, `endpoints`, `chat`, `agent`, `tui` or `cli`, nor Textual or Rich.
"""
