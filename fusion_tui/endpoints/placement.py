"""Provides the placement policy: which (endpoint, slot) a session's requests go to, and why.

Pure functions over snapshots (`EndpointView`), so every rule is unit-tested without a server;
the backends act on the returned `Placement`. The rules:

* a new session goes to a healthy endpoint serving the requested model with a free slot, the best
  measured speed and the fewest queued requests first (speed / (1 + queued)); an empty slot on
  any endpoint comes before an idle one that still holds another session's prompt, as the
  one-server keeper prefers a slot no session holds: taking the held one evicts that session's
  cache (it reads its whole prompt again when it comes back) while the empty one costs nothing;
* a resumed session goes back to the endpoint holding its prompt or its saved slot file;
* a slot another client keeps busy (processing while we have nothing in flight there) is never
  named; a pin on such a slot adapts, and the reason says so;
* when an endpoint goes away its sessions may move to another endpoint with the same model: a cold
  re-read whose cost in prompt tokens is stated; with nowhere to go the decision is to wait.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal

Action = Literal["use", "move", "wait"]
ANY_SLOT = -1
"""`id_slot: -1`: the server picks (used when `/slots` is switched off)."""


def model_key(model: str | None) -> str | None:
    """Compare models across machines by file name (paths differ from box to box)."""
    if not model:
        return None
    name = PurePath(model.replace("\\", "/")).name.lower()
    return name[:-5] if name.endswith(".gguf") else name


@dataclass(frozen=True)
class SlotLoad:
    """One slot as placement weighs it: `/slots` plus what we know about our own requests."""

    id: int
    processing: bool = False
    ours: bool = False
    """We have a request in flight on this slot."""
    n_tokens: int = 0
    """Tokens held in the slot's cache (0: never used since the server started)."""

    @property
    def foreign_busy(self) -> bool:
        """Someone else's work: processing while nothing of ours is in flight there."""
        return self.processing and not self.ours


@dataclass(frozen=True)
class EndpointView:
    """An endpoint's state at one moment, as the health watcher and the backends know it."""

    label: str
    healthy: bool
    model: str | None = None
    total_slots: int = 0
    tok_s: float | None = None
    """Measured decode speed (probe or recent turns); None: not measured yet."""
    slots: tuple[SlotLoad, ...] | None = None
    """None when `/slots` is switched off (then slots are never named: id_slot -1)."""
    queued: int = 0
    """Our requests waiting for or running on this endpoint."""
    pinned: frozenset[int] = frozenset()
    """Slots pinned to our other sessions (not free for a new one)."""
    reserved: frozenset[int] = frozenset()
    """Slots kept for side calls."""
    error: str = ""
    """Why it is unhealthy (shown in reasons)."""
    slot_files: frozenset[str] = frozenset()
    """Sessions whose saved slot file lives on this server's disk."""

    @property
    def foreign_busy(self) -> int:
        return sum(1 for s in self.slots or () if s.foreign_busy)

    def free_slots(self) -> list[SlotLoad]:
        """Idle, not pinned, not reserved; never-used first, then the least cached."""
        if self.slots is None:
            return []
        free = [
            s
            for s in self.slots
            if not s.processing and s.id not in self.pinned and s.id not in self.reserved
        ]
        return sorted(free, key=lambda s: (s.n_tokens, s.id))

    def serves(self, model: str | None) -> bool:
        return model is None or model_key(self.model) == model_key(model)


@dataclass(frozen=True)
class Pin:
    """Where a session lives: endpoint label (None: the default endpoint) and slot."""

    endpoint: str | None
    slot: int | None


@dataclass(frozen=True)
class Placement:
    """The decision and the words for it (telemetry, stderr, the TUI's question)."""

    action: Action
    """`use` the endpoint/slot, `move` there from `moved_from` (cold), or `wait`."""
    endpoint: str | None
    slot: int = ANY_SLOT
    reason: str = ""
    moved_from: str | None = None
    cold_tokens: int = 0
    """Prompt tokens the server must evaluate again (0 when the cache is warm)."""
    repinned: bool = False
    """The pin changed (a new slot or endpoint): the session should store it."""
    alternatives: tuple[str, ...] = field(default_factory=tuple)
    """Other endpoints that could take the session (for a `wait`, none)."""


def _eligible(views: Iterable[EndpointView], model: str | None) -> list[EndpointView]:
    return [v for v in views if v.healthy and v.serves(model)]


def _rank(views: Sequence[EndpointView]) -> list[EndpointView]:
    """Best first. An endpoint not measured yet counts as fast as the fastest measured one, so
    it gets sessions (and a measurement) instead of starving behind the measured ones."""
    order = {v.label: i for i, v in enumerate(views)}
    known = [v.tok_s for v in views if v.tok_s]
    fill = max(known) if known else 0.0

    def score(v: EndpointView) -> float:
        return (v.tok_s or fill) / (1 + v.queued + v.foreign_busy)

    return sorted(views, key=lambda v: (-score(v), v.queued + v.foreign_busy, order[v.label]))


def _pick_slot(view: EndpointView, shared: bool = False) -> int | None:
    """A free slot on `view`; ANY_SLOT when `/slots` is off, or (`shared`) when every idle slot
    is pinned to another of our sessions (the server then picks one, as a single-server app
    does); None when nothing idle is left."""
    if view.slots is None:
        return ANY_SLOT
    free = view.free_slots()
    if free:
        return free[0].id
    if shared and any(not s.processing and s.id not in view.reserved for s in view.slots):
        return ANY_SLOT
    return None


def _empty_slot(view: EndpointView) -> int | None:
    """A free slot on `view` that holds nothing (never used, or erased); None when every free
    slot still holds a prompt, or `/slots` is off (then nobody knows what the slots hold)."""
    free = view.free_slots() if view.slots is not None else []
    return free[0].id if free and free[0].n_tokens == 0 else None


def _first_pick(ranked: Sequence[EndpointView]) -> tuple[EndpointView, int] | None:
    """The best-ranked endpoint and slot for a session that holds nothing yet: an empty slot
    anywhere first (nothing is evicted), then the best endpoint's least-held free slot (another
    session's cache goes), then an idle slot our sessions share (the server picks it)."""
    for pick in (_empty_slot, _pick_slot, lambda v: _pick_slot(v, shared=True)):
        for view in ranked:
            slot = pick(view)
            if slot is not None:
                return view, slot
    return None


SHARED = "any slot (none is free: the server picks one, which may evict another session's cache)"


def _where(view: EndpointView, slot: int) -> str:
    if slot != ANY_SLOT:
        return f"slot {slot}"
    return "any slot (its /slots is off)" if view.slots is None else SHARED


def _speed(view: EndpointView) -> str:
    return f"~{view.tok_s:.0f} tok/s" if view.tok_s else "speed not measured yet"


def place_new(views: Sequence[EndpointView], model: str | None = None) -> Placement:
    """A new session: the best-ranked healthy endpoint serving `model` with a free slot."""
    candidates = _eligible(views, model)
    if not candidates:
        return Placement("wait", None, reason=_nowhere(views, model))
    picked = _first_pick(_rank(candidates))
    if picked is not None:
        view, slot = picked
        where = _where(view, slot)
        others = len(candidates) - 1
        why = f"{view.label} {where}: {_speed(view)}, {view.queued} queued"
        if others:
            why += f" (best of {len(candidates)} endpoints serving the model)"
        return Placement("use", view.label, slot, why, repinned=True)
    busy = ", ".join(v.label for v in candidates)
    return Placement("wait", None, reason=f"every slot is taken on {busy}; waiting for one to free")


def place_resumed(
    pin: Pin,
    views: Sequence[EndpointView],
    model: str | None = None,
    *,
    session_id: str | None = None,
    prompt_tokens: int = 0,
    default_endpoint: str | None = None,
) -> Placement:
    """A resumed session: back to the endpoint that holds its prompt or its slot file (a slot
    file lives on that server's disk); elsewhere only as a stated failover."""
    label = pin.endpoint or default_endpoint
    by_label = {v.label: v for v in views}
    if label is None and session_id is not None:
        label = next((v.label for v in views if session_id in v.slot_files), None)
    home = by_label.get(label) if label is not None else None
    if home is None:
        if label is not None:
            return failover(pin, views, model, prompt_tokens=prompt_tokens, why="is not configured")
        return place_new(views, model)
    if not home.healthy:
        return failover(pin, views, model, prompt_tokens=prompt_tokens)
    if not home.serves(model):
        return failover(
            pin, views, model, prompt_tokens=prompt_tokens,
            why=f"now serves {home.model or 'another model'}",
        )  # fmt: skip
    checked = check_pin(Pin(home.label, pin.slot), home, prompt_tokens=prompt_tokens)
    if checked.action == "use" and not checked.repinned:
        has_file = session_id is not None and session_id in home.slot_files
        source = "its saved slot file" if has_file else "its prompt"
        where = f"slot {checked.slot}" if checked.slot != ANY_SLOT else "its slot"
        return Placement(
            "use", home.label, checked.slot, f"back to {home.label} {where}, which holds {source}"
        )
    return checked


def check_pin(pin: Pin, view: EndpointView, *, prompt_tokens: int = 0) -> Placement:
    """Keep a pin unless `/slots` shows another client's work on its slot; then re-pin to a free
    slot on the same endpoint (a cold re-read), or wait when there is none."""
    label = view.label
    if pin.slot is None or pin.slot == ANY_SLOT or view.slots is None:
        slot = pin.slot if pin.slot is not None else ANY_SLOT
        return Placement("use", label, slot if view.slots is not None else ANY_SLOT, "pinned")
    mine = next((s for s in view.slots if s.id == pin.slot), None)
    if mine is None:
        alt = _pick_slot(view)
        why = f"slot {pin.slot} no longer exists on {label} ({view.total_slots} slots now)"
        if alt is None:
            return Placement("wait", label, reason=f"{why}; every other slot is taken")
        return Placement("use", label, alt, f"{why}; re-pinned to slot {alt}, a cold re-read "
                         f"of {prompt_tokens:,} prompt tokens", cold_tokens=prompt_tokens,
                         repinned=True)  # fmt: skip
    if not mine.foreign_busy:
        return Placement("use", label, pin.slot, "pinned")
    alt = _pick_slot(view)
    why = f"slot {pin.slot} on {label} is busy with another client's work"
    if alt is None:
        return Placement("wait", label, reason=f"{why}; no other slot is free, waiting")
    return Placement(
        "use", label, alt,
        f"{why}; re-pinned to slot {alt}, a cold re-read of {prompt_tokens:,} prompt tokens",
        cold_tokens=prompt_tokens, repinned=True,
    )  # fmt: skip


def failover(
    pin: Pin,
    views: Sequence[EndpointView],
    model: str | None = None,
    *,
    prompt_tokens: int = 0,
    why: str = "",
) -> Placement:
    """The pin's endpoint is gone (or unusable): move to the best other endpoint serving the same
    model, stating the cold re-read; `wait` when none can take it. The TUI asks before acting
    on a `move`; headless runs act on it and say so on stderr."""
    gone = pin.endpoint or "the endpoint"
    home = next((v for v in views if v.label == pin.endpoint), None)
    if not why:
        why = f"is unreachable ({home.error})" if home and home.error else "is unreachable"
    others = [v for v in _eligible(views, model) if v.label != pin.endpoint]
    picked = _first_pick(_rank(others))
    if picked is not None:
        view, slot = picked
        where = _where(view, slot)
        return Placement(
            "move", view.label, slot,
            f"{gone} {why}; moving to {view.label} {where}: a cold re-read of "
            f"{prompt_tokens:,} prompt tokens",
            moved_from=pin.endpoint, cold_tokens=prompt_tokens, repinned=True,
            alternatives=tuple(v.label for v in others if v.label != view.label),
        )  # fmt: skip
    if others:
        busy = ", ".join(v.label for v in others)
        return Placement(
            "wait", pin.endpoint, reason=f"{gone} {why}; every slot on {busy} is taken, waiting"
        )
    return Placement(
        "wait", pin.endpoint, reason=f"{gone} {why}; {_nowhere(views, model, exclude=pin.endpoint)}"
    )


def _nowhere(views: Sequence[EndpointView], model: str | None, exclude: str | None = None) -> str:
    rest = [v for v in views if v.label != exclude]
    if not rest:
        return "no other endpoint is configured, waiting for it to come back"
    if not any(v.healthy for v in rest):
        return "no other endpoint is reachable, waiting"
    name = model_key(model) or "the model"
    return f"no other reachable endpoint serves {name}, waiting"
