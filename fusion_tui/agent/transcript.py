"""The agent transcript (the packer's messages) kept beside a session file.

The session schema has no field for it, so it lives in `<sessions>/agent/<id>.json`, written
atomically like the session itself. A resumed session rebuilds its packer from these messages
with the current frame and prefix: on the same daemon the prompt is byte-identical to the last one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fusion_tui.agent.prompt import PromptMessage, PromptPacker
from fusion_tui.atomic import atomic_write
from fusion_tui.server.template import TemplateFrame
from fusion_tui.sessions.model import SessionFileError
from fusion_tui.sessions.store import SessionStore


def packer_path(store: SessionStore, session_id: str) -> Path:
    return store.path_for(session_id).parent / "agent" / f"{session_id}.json"


def load_transcript(store: SessionStore, session_id: str) -> dict[str, Any] | None:
    """The stored packer state, None when there is none; a damaged file is a `SessionFileError`."""
    path = packer_path(store, session_id)
    try:
        data = json.loads(path.read_text("utf-8"))
        msgs = [_message(m) for m in data["messages"]]
        PromptPacker(TemplateFrame.chatml(), "", list(msgs))  # alternation is checked here
        archived = data.get("archived", [])
        if not isinstance(archived, list):
            raise ValueError("'archived' is not a list")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SessionFileError(
            f"the agent transcript is damaged ({exc}); move it away to start the transcript afresh",
            path=str(path),
        ) from exc
    return {"messages": msgs, "archived": archived}


def _message(raw: Any) -> PromptMessage:
    role = raw["role"]
    if role not in ("user", "assistant"):
        raise ValueError(f"a message role is {role!r}, not user or assistant")
    return PromptMessage(role, str(raw["text"]), str(raw.get("kind", "")))


def save_transcript(
    store: SessionStore, session_id: str, packer: PromptPacker, archived: list[dict[str, Any]]
) -> None:
    path = packer_path(store, session_id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {**packer.to_dict(), "archived": archived}
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8"))
