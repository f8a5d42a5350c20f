"""The Textual app: it draws, binds keys and runs workers; no logic of its own.

The app factory (`app.build_app`), the key bindings and their ids (`bindings.py`), the command
palette, the approver of the agent's writes and of a session's move, themes, notices, key arrival
times, the SIGILL relaunch and the start-failure notice; `screens/` and `widgets/` below. It talks
to a session through `chat`'s `Backend` and reads facts of the core (`status`, `server.connect`,
`config`, `fit`, ...). With `cli/app.py`, which starts it, it is the only code that imports
Textual and Rich; only `cli` imports it.
"""
