"""The session and its store: messages, pin, server identity, telemetry, saved atomically.

`model.py` is the session and its turn bookkeeping (`begin_turn`, `end_turn`, `record_request`),
shared by the chat, the agent and `fusion-tui run`; `records.py` and `fields.py` what it keeps and
how a file is read strictly; `store.py` the versioned store with `migrations.py`; `lock.py` one
writer per session file, across processes. It may import `clock`, `atomic` and `paths` only: no
server, no slot policy, no UI.
"""
