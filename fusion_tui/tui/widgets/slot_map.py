"""Provides `SlotMap`: the live map of llama-server's slots, polled from `GET /slots`.

Why a poll: the server pushes nothing about slots it is not streaming to us, and the map must
show every slot (other sessions, side calls, other clients). A timer ticks every second while the
map is visible and its screen active; each tick starts one poll in an exclusive worker with its
own deadline, and skips while a poll is still out (so a hanging server shows "busy" after the
deadline instead of being cancelled by the next tick). The arithmetic lives in
`fusion_tui.slots.rates`; this module only draws.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.events import Resize
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from fusion_tui.server.errors import SlotsUnavailable
from fusion_tui.server.types import SlotState
from fusion_tui.slots.rates import SlotReading, SlotSample, readings

SlotsFn = Callable[[], Awaitable[list[SlotState]]]
OwnersFn = Callable[[], Mapping[int, str]]
TotalsFn = Callable[[], Mapping[int, int]]

SIDE = "side"
BAR_WIDTH = 10
ROW_WIDTH = 44
NARROW_BELOW = 100
UNAVAILABLE_TEXT = "/slots is switched off on this server (start it with --slots): no slot map."


@dataclass(frozen=True)
class SlotRow:
    """One slot as drawn: the server's reading plus who owns the slot ("" for nobody)."""

    reading: SlotReading
    owner: str = ""


@dataclass(frozen=True)
class PollStatus:
    """How the last poll went; `detail` is one line."""

    kind: Literal["waiting", "ok", "busy", "unavailable", "error"]
    detail: str = ""


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _rate(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.1f} tok/s" if value < 100 else f"{value:,.0f} tok/s"


def row_content(row: SlotRow, width: int = ROW_WIDTH) -> Content:
    """State and owner, cache against n_ctx, then prompt or decode progress with the live rate."""
    r = row.reading
    if r.phase == "idle":
        state = ("○ idle     ", "$text-muted")
    elif r.phase == "prompt":
        state = ("● prompt   ", "bold $warning")
    else:
        state = ("● decoding ", "bold $success")
    room = max(4, width - 3 - len(state[0]))
    if row.owner == SIDE:
        owner = (SIDE, "italic $accent")
    elif row.owner:
        owner = (_clip(row.owner, room), "bold")
    else:
        owner = ("—", "$text-muted")
    parts: list[str | tuple[str, str]] = [
        (f"{r.id:>2} ", "bold"),
        state,
        owner,
        "\n   cache  ",
        (bar(r.cache_fraction), "$primary"),
        (f" {r.cached:,}/{r.n_ctx:,}", "$text-muted"),
    ]
    if r.phase == "idle":
        return Content.assemble(*parts)
    if r.phase == "decode":
        line = f"   decode {r.decoded:,} tok"
        parts.append("\n" + line)
    else:
        fraction = r.prompt_fraction
        if fraction is None:
            line = f"   prompt {r.prompt_done:,} read"
            parts.append("\n" + line)
        else:
            line = f"   prompt {bar(fraction)} {r.prompt_done:,}/{r.prompt_total or 0:,}"
            parts += ["\n   prompt ", (bar(fraction), "$warning")]
            parts.append(f" {r.prompt_done:,}/{r.prompt_total or 0:,}")
    rate = _rate(r.tokens_per_second)
    if rate:
        if len(line) + 3 + len(rate) <= width:
            parts.append(f" · {rate}")
        else:
            parts.append(f"\n{' ' * 10}{rate}")
    return Content.assemble(*parts)


def summary_line(rows: Sequence[SlotRow], status: PollStatus) -> str:
    """The one-line map of a narrow terminal."""
    if status.kind == "unavailable":
        return "slots: /slots is off on this server"
    if status.kind == "waiting" and not rows:
        return "slots: waiting for the server…"
    if status.kind == "error" and not rows:
        return f"slots: error · {status.detail}"
    busy = [row for row in rows if row.reading.processing]
    head = f"slots {len(busy)}/{len(rows)} busy"
    if status.kind == "busy":
        head += " (no answer)"
    parts = [head]
    for row in busy:
        r = row.reading
        who = f" {_clip(row.owner, 16)}" if row.owner else ""
        if r.phase == "prompt":
            fraction = r.prompt_fraction
            what = f"prompt {fraction:.0%}" if fraction is not None else f"prompt {r.prompt_done:,}"
        else:
            what = f"decode {r.decoded:,} tok"
        rate = f" · {_rate(r.tokens_per_second)}" if r.tokens_per_second is not None else ""
        parts.append(f"#{r.id}{who} {what}{rate}")
    idle = [row for row in rows if not row.reading.processing]
    if idle and busy:
        parts.append(f"{len(idle)} idle")
    return " │ ".join(parts)


def status_line(rows: Sequence[SlotRow], status: PollStatus) -> str:
    if status.kind == "unavailable":
        return UNAVAILABLE_TEXT
    if status.kind == "waiting":
        return "Slots · waiting for the server…"
    busy = sum(1 for row in rows if row.reading.processing)
    head = f"Slots · {busy}/{len(rows)} busy"
    if status.kind == "busy":
        return f"{head} · busy: {status.detail}"
    if status.kind == "error":
        return f"{head} · error: {status.detail}"
    return head


class SlotMap(Vertical):
    """One entry per slot: state, owner, cache bar, prompt progress, decoded tokens, tok/s."""

    DEFAULT_CSS = """
    SlotMap {
        width: 46;
        height: 1fr;
        border-left: vkey $panel-lighten-2;
        padding: 0 0 0 1;
    }
    SlotMap > #slot-head { height: auto; color: $text-muted; text-style: bold; }
    SlotMap.-busy > #slot-head { color: $warning; }
    SlotMap.-error > #slot-head, SlotMap.-unavailable > #slot-head { color: $error; }
    SlotMap > #slot-list { height: 1fr; border: none; padding: 0; background: transparent; }
    SlotMap > #slot-list:focus > .option-list--option-highlighted {
        background: $primary 25%;
        color: $foreground;
    }
    SlotMap > #slot-list:blur > .option-list--option-highlighted {
        background: transparent;
        color: $foreground;
        text-style: none;
    }
    SlotMap.-unavailable > #slot-list { display: none; }
    SlotMap > #slot-summary { display: none; height: 1; }
    SlotMap.-narrow {
        dock: top;
        width: 100%;
        height: 1;
        border-left: none;
        padding: 0 1;
        background: $panel;
    }
    SlotMap.-narrow > #slot-head, SlotMap.-narrow > #slot-list { display: none; }
    SlotMap.-narrow > #slot-summary {
        display: block;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    class SlotSelected(Message):
        """The user picked a slot (the main screen opens the session that owns it)."""

        def __init__(self, slot_map: SlotMap, slot_id: int, owner: str) -> None:
            super().__init__()
            self.slot_map = slot_map
            self.slot_id = slot_id
            self.owner = owner

        @property
        def control(self) -> SlotMap:
            return self.slot_map

    rows: reactive[tuple[SlotRow, ...]] = reactive((), init=False)
    """The last answered poll, one frozen row per slot; identical polls cost nothing."""
    status: reactive[PollStatus] = reactive(PollStatus("waiting"), init=False)
    """How the last poll went (kept as state: no toast per failed poll)."""
    narrow: reactive[bool] = reactive(False, init=False)
    """True on a terminal narrower than `narrow_below`: one summary line instead of the map."""

    def __init__(
        self,
        slots_fn: SlotsFn,
        owners_fn: OwnersFn | None = None,
        *,
        prompt_totals_fn: TotalsFn | None = None,
        on_disk_fn: Callable[[], Sequence[str]] | None = None,
        poll_interval: float | None = 1.0,
        deadline: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        narrow_below: int = NARROW_BELOW,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """`poll_interval=None` disables the timer (tests drive `refresh_now`/`feed`)."""
        super().__init__(name=name, id=id, classes=classes)
        self._slots_fn = slots_fn
        self._owners_fn = owners_fn or dict
        self._totals_fn = prompt_totals_fn
        self._on_disk_fn = on_disk_fn
        """Sessions whose slot is saved on disk, not in a slot (more sessions than slots)."""
        self.poll_interval = poll_interval
        self.deadline = deadline
        self._clock = clock
        self.narrow_below = narrow_below
        self._sample: SlotSample | None = None
        self._timer: Timer | None = None
        self._polling = False
        self._paused = True

    def compose(self) -> ComposeResult:
        yield Static(id="slot-head")
        yield OptionList(id="slot-list")
        yield Static(id="slot-summary")

    def on_mount(self) -> None:
        self._check_narrow()
        self._draw()
        if self.poll_interval is not None:
            self._timer = self.set_interval(self.poll_interval, self._tick, pause=True)
            self.app.screen_change_signal.subscribe(self, self._on_screen_change)
            self._sync_timer()

    # --- polling -------------------------------------------------------------------------------

    @property
    def is_polling_paused(self) -> bool:
        """True while the timer is stopped (hidden, screen suspended, or polling disabled)."""
        return self._timer is None or self._paused

    def _should_poll(self) -> bool:
        try:
            return self.screen.is_active and self.is_on_screen
        except Exception:  # not mounted (yet, or any more)
            return False

    def _sync_timer(self) -> None:
        if self._timer is None:
            return
        if self._should_poll():
            if self._paused:
                self._paused = False
                self._timer.resume()
                self._tick()  # fresh data at once when the map comes back
        elif not self._paused:
            self._paused = True
            self._timer.pause()

    def _on_screen_change(self, screen: Screen[object]) -> None:
        self._sync_timer()

    def on_show(self) -> None:
        self._sync_timer()

    def on_hide(self) -> None:
        self._sync_timer()

    def _tick(self) -> None:
        if self._polling or not self._should_poll():
            return
        self.poll()

    @work(exclusive=True, group="slot-poll", exit_on_error=False, description="GET /slots")
    async def poll(self) -> None:
        """One poll in a worker (the timer never awaits HTTP itself)."""
        await self.refresh_now()

    async def refresh_now(self) -> None:
        """Poll once with the deadline and update the map (tests call this directly)."""
        self._polling = True
        try:
            with anyio.fail_after(self.deadline):
                states = await self._slots_fn()
        except TimeoutError:
            self.status = PollStatus("busy", f"no answer within {self.deadline:g} s")
        except SlotsUnavailable:
            self._sample = None
            self.rows = ()
            self.status = PollStatus("unavailable")
        except Exception as exc:  # shown compactly; the next poll tries again
            self.status = PollStatus("error", compact_error(exc))
        else:
            self.feed(states)
        finally:
            self._polling = False

    def feed(self, states: Sequence[SlotState], at: float | None = None) -> None:
        """Show an answered poll taken at `at` (monotonic seconds; the clock when None)."""
        sample = SlotSample(self._clock() if at is None else at, tuple(states))
        totals = self._totals_fn() if self._totals_fn is not None else None
        owners = self._owners_fn()
        self.rows = tuple(
            SlotRow(reading, owners.get(reading.id, ""))
            for reading in readings(self._sample, sample, totals)
        )
        self._sample = sample
        self.status = PollStatus("ok")

    # --- drawing -------------------------------------------------------------------------------

    def watch_rows(self) -> None:
        self._draw()

    def watch_status(self, status: PollStatus) -> None:
        for kind in ("busy", "error", "unavailable"):
            self.set_class(status.kind == kind, f"-{kind}")
        self._draw()

    def watch_narrow(self, narrow: bool) -> None:
        self.set_class(narrow, "-narrow")

    def on_resize(self, event: Resize) -> None:
        self._check_narrow()

    def _check_narrow(self) -> None:
        self.narrow = self.app.size.width < self.narrow_below

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        head = status_line(self.rows, self.status)
        on_disk = self._on_disk_fn() if self._on_disk_fn is not None else ()
        if on_disk:
            head += f"\non disk: {', '.join(on_disk)}"
        self.query_one("#slot-head", Static).update(head)
        self.query_one("#slot-summary", Static).update(summary_line(self.rows, self.status))
        options = self.query_one("#slot-list", OptionList)
        ids = [f"slot-{row.reading.id}" for row in self.rows]
        if [option.id for option in options.options] == ids:
            for index, row in enumerate(self.rows):
                options.replace_option_prompt_at_index(index, row_content(row))
            return
        highlighted = options.highlighted
        options.set_options(
            Option(row_content(row), id=option_id)
            for row, option_id in zip(self.rows, ids, strict=True)
        )
        if self.rows:
            options.highlighted = min(highlighted or 0, len(self.rows) - 1)

    @on(OptionList.OptionSelected, "#slot-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        row = self.rows[event.option_index]
        self.post_message(self.SlotSelected(self, row.reading.id, row.owner))


def compact_error(exc: BaseException) -> str:
    """The first line of an error, short enough for one line of the map."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return _clip(text, 120)
