"""Talking to a llama-server over HTTP: the client, its bounded transport and the event streams.

`client.py` (`LlamaClient`: the server's endpoints), `transport.py` (`ServerHTTP`: one retry,
bounded reads and streams, typed errors), `sse.py` (server-sent events, bounded per line and per
event), `events.py` (a stream's events, typed) and `error_bodies.py` (an error answer turned into
the typed `ServerError` it stands for). It imports only `server.errors` and `server.types`: it
neither starts nor knows any process.
"""
