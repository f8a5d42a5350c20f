"""How requests share the server's slots: pins, gates, saved slots, side calls, watches.

The one slot policy of every path, `keeper.py` (`SlotKeeper`: a fresh slot, warm resume, room
for more sessions than slots, saves before leaving; its parts `keeper_owners.py` and
`keeper_room.py`), used by the plain chat, agent mode and `fusion-tui run` alike; below it
session-to-slot pins and the side-call slot, the one-request-per-slot gate (and the one gate per
server for the whole process), saved slot files (`archive.py`, `saving.py`) and the shared ledger
of who holds which slot, the record of what the server moved to its RAM cache, the side-call
queue, the first-token watch, prompt progress and measured rates. It may import `server`,
`sessions`, `config`, `status`, `clock`, `paths` and `atomic`; never `endpoints`, `chat`,
`agent`, `tui` or `cli`, nor Textual or Rich.
"""
