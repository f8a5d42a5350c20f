"""When an agent session's transcript is summarised, and the side request that summarises it.

The step loop (`loop.py`) decides *where* a summary goes (the task's first message, or the next
task's, carried); this collaborator decides *whether* one is due and asks for it. Both questions
are answered in the server's own token counts (`ContextMeter`, `/tokenize`), never by a guess
alone: a prompt that fits is never compacted, and a transcript that will not leave room for the
next task is compacted after the task, while the user reads its outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fusion_tui.agent.deadline import CancelToken
from fusion_tui.agent.events import EventSink, TranscriptCompacted
from fusion_tui.agent.prompt import ContextMeter, PromptPacker
from fusion_tui.agent.request import Streamed, stream_request
from fusion_tui.agent.task import AgentConfig, AgentDeps
from fusion_tui.server.errors import ContextExceeded

LOG_CHARS = 60_000
"""At most this much of the work log goes into a compaction's summary request."""
SUMMARY_OVERHEAD = 256
"""Tokens of the summary request besides the log: its instruction and the template."""
SUMMARY_ASK = (
    "Summarize this coding agent's work log: facts found, files changed, "
    "what remains. Be brief and concrete."
)


def next_task_room(n_ctx: int) -> int:
    """Tokens a finished task's session keeps free for the next task's message (the task and
    the files shown with it) before it compacts ahead: an eighth of the slot, at least 256 and
    at most 4,096."""
    return max(256, min(4096, n_ctx // 8))


class TranscriptCompactor:
    """Whether the transcript must be summarised, and the summary from the side slot.

    `step`, `deadline` and `cancel` are read when a request goes (the run's step, its ceiling and
    the user's cancel at that moment)."""

    def __init__(
        self,
        deps: AgentDeps,
        config: AgentConfig,
        meter: ContextMeter,
        emit: EventSink,
        step: Callable[[], int],
        deadline: Callable[[], float],
        cancel: CancelToken,
    ) -> None:
        self.deps, self.cfg, self.meter, self.emit = deps, config, meter, emit
        self.step, self.deadline, self.cancel = step, deadline, cancel

    def context(self) -> int:
        """The slot's context now (the meter follows a move to another endpoint)."""
        if self.deps.context_size is not None:
            self.meter.n_ctx = self.deps.context_size()
        return self.meter.n_ctx

    def summary_room(self) -> int:
        """Tokens the compaction's work log may take: the slot less the summary's answer and
        the request's own words."""
        n_ctx = self.context()
        if n_ctx <= 0:  # not known: the log as it always went
            return LOG_CHARS
        return n_ctx - min(self.cfg.summary_n_predict, n_ctx // 4) - SUMMARY_OVERHEAD

    async def needed(self, prompt: str) -> bool:
        """Whether `prompt` and its answer may not fit the slot. The estimate decides only when
        it says "fits"; a "may not fit" before the server has counted anything is checked with
        the server's tokenizer, so a prompt that fits is never compacted."""
        reserve = min(self.cfg.n_predict, self.context() // 4)
        threshold = self.cfg.compact_threshold
        if not self.meter.near_limit(len(prompt), reserve, threshold):
            return False
        if self.meter.prompt_tokens > 0 or self.deps.count_tokens is None:
            return True
        try:
            counted = await self.deps.count_tokens(prompt)
        except Exception:  # no count to be had: the estimate stands
            return True
        self.meter.prompt_tokens, self.meter.prompt_chars = counted, len(prompt)
        return counted + reserve >= int(self.meter.n_ctx * threshold)

    async def due_after_task(self, packer: PromptPacker) -> int:
        """After a task: the transcript's tokens when the next task would likely not fit the
        slot beside it (room for a new task's message, and the answer's reserve), else 0.
        Counted with the server's tokenizer, and only when the transcript's bytes could reach
        the limit at all (a token is at least a byte)."""
        n_ctx = self.context()
        if n_ctx <= 0 or not packer.messages or packer.awaiting_reply or packer.carries:
            return 0
        text = packer.text
        reserve = min(self.cfg.n_predict, n_ctx // 4) + next_task_room(n_ctx)
        limit = int(n_ctx * self.cfg.compact_threshold)
        if len(text.encode("utf-8")) + reserve < limit:
            return 0
        if self.deps.count_tokens is None:
            tokens = self.meter.estimate(len(text))
        else:
            try:
                tokens = await self.deps.count_tokens(text)
            except Exception:  # no count to be had: the next task compacts when it must
                return 0
        return tokens if tokens + reserve >= limit else 0

    async def side_summary(self, packer: PromptPacker) -> str | None:
        """`packer`'s transcript summarised on the side slot, or None. The log is cut to the
        slot (the meter's chars per token, else 2); when the slot still refuses it (a smaller
        endpoint after a move), once more cut by the refused count."""
        log = "\n\n".join(f"[{m.role}] {m.text}" for m in packer.messages)
        m, room = self.meter, self.summary_room()
        if room <= 0:  # the slot cannot hold a summary request: nothing to gain
            return None
        per_token = m.prompt_chars / m.prompt_tokens if m.prompt_tokens > 0 else 2.0
        keep = min(LOG_CHARS, len(log), int(room * per_token))
        reply = await self.summary_of(log, keep)
        refused = reply.exc.n_prompt_tokens if isinstance(reply.exc, ContextExceeded) else 0
        if refused > 0 and keep > 0:
            keep = int(keep * room / refused * 0.9)
            reply = await self.summary_of(log, keep)
        if reply.ended != "ok":
            return None
        return reply.text.strip()

    async def summary_of(self, log: str, keep: int) -> Streamed:
        """The compaction's summary request over the last `keep` characters of `log`."""
        side = PromptPacker(self.deps.frame, SUMMARY_ASK)
        side.add_user(log[-keep:] if keep > 0 else "", kind="note")
        body: dict[str, Any] = {
            **self.cfg.sampling,
            "prompt": side.prompt(),
            "id_slot": self.deps.slots.side_call_slot(),
            "cache_prompt": False,
            "stream": True,
            "n_predict": self.cfg.summary_n_predict,
        }
        return await stream_request(
            self.deps.completion, body, step=self.step(), purpose="compaction",
            clock=self.deps.clock, deadline=self.deadline(), cancel=self.cancel,
            on_event=self.emit,
        )  # fmt: skip

    def announce(self, before: int, chars: int) -> None:
        """Say that the transcript was compacted (`before`: tokens in the slot until then;
        `chars`: the summary's length)."""
        if self.deps.prefix_reuse == "none":
            note = "compaction costs a full re-read: this model's prefix reuse is none"
        else:
            note = "the stable prefix stays cached; the summary and what follows are read anew"
        self.emit(TranscriptCompacted(self.step(), before, chars, note))
