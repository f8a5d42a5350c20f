"""Provides the sentences a chat turn ends with: what it cost, why it stalled, why it no longer
fits its slot."""

from __future__ import annotations

from fusion_tui.config import Settings
from fusion_tui.endpoints.context_fit import MovedTooLarge
from fusion_tui.server.errors import ContextExceeded, StreamStalled
from fusion_tui.sessions.model import Session
from fusion_tui.slots.keeper_room import ResumeState
from fusion_tui.slots.watch import FirstTokenStall


def stall_message(exc: StreamStalled, settings: Settings) -> str:
    """What a stalled request says (after the one retry, or mid-answer)."""
    if isinstance(exc, FirstTokenStall):
        return f"after one retry: {exc}"
    idle = settings.local_models.request_timeout_ms / 1000
    if "middle of an answer" in str(exc):
        return (
            f"the answer stalled: no bytes from llama-server for {idle:g} s "
            "(localModels.requestTimeoutMs); the partial answer is kept"
        )
    return str(exc)


def cost_note(session: Session, resume: ResumeState | None) -> str:
    """The finished turn's note: slot, cached tokens, first token, speed (or how it resumed)."""
    own = [r for r in session.requests if not r.side_call]
    if not own:
        return ""
    last = own[-1]
    total = last.prompt_n + last.cache_n
    cached = f"{last.cache_n:,} of {total:,} prompt tokens cached"
    if resume is not None:
        how = {"same": "", "restored": " (restored from disk)", "cold": " cold"}[resume.kind]
        why = f" ({resume.reason})" if resume.reason else ""
        return f"resumed{how} on slot {last.id_slot}{why} · {cached} · {last.ttft_ms / 1000:.1f} s"
    return (
        f"slot {last.id_slot} · {cached} · first token {last.ttft_ms / 1000:.1f} s · "
        f"{last.predicted_per_second:.0f} tok/s"
    )


def context_full_message(exc: ContextExceeded) -> str:
    """What to do when a session no longer fits its slot (the server refuses, nothing is lost;
    after a move to another endpoint, the sentence names both endpoints)."""
    if isinstance(exc, MovedTooLarge):
        return exc.message
    return (
        f"this session no longer fits the slot: {exc.n_prompt_tokens:,} prompt tokens for a "
        f"{exc.n_ctx:,}-token context. Your message is saved; start a new session (Ctrl+N) or "
        "launch with fewer slots or a larger context (F2)"
    )
