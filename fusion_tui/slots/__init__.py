"""How requests share the server's slots: pins, gates, saved slots, side calls, watches.

Session-to-slot pins and the side-call slot, the one-request-per-slot gate (and the one gate per
server for the whole process), saved slot files and the shared ledger of who holds which slot,
the record of what the server moved to its RAM cache, the side-call queue, the first-token watch,
prompt progress and measured rates. It may import `server` (client, types, errors), `clock` and
`atomic`; never `sessions`, `chat`, `agent`, `tui` or `cli`, nor Textual or Rich.
"""
