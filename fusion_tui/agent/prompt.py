"""Prompt packing: a byte-stable prefix, an append-only history, volatile facts in the tail.

Why: every step's prompt must be the previous step's prompt plus the model's own output plus
new text, so the slot's KV cache is never re-read. The pieces between messages come from the
model's template frame (`server/template.py`); the volatile tail (step count, time left) is
written at the end of a new user message and never touched again, so it becomes history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fusion_tui.agent.protocol import ToolSpec
from fusion_tui.server.template import TemplateFrame

Role = Literal["user", "assistant"]
PrefixReuse = Literal["full", "checkpoint", "none"]


@dataclass(frozen=True)
class MachineFacts:
    """Facts fixed for the daemon's lifetime; rendered into the stable prefix."""

    model: str
    slots: int
    ctx_per_worker: int
    tok_per_s: float | None = None
    prefix_reuse: PrefixReuse = "full"

    def render(self) -> str:
        """The facts in the stable prefix. Not the measured speed: it changes with every launch,
        and the prefix must be the same bytes on the next daemon for a restored slot to match
        (seen: a resumed agent session re-read all but 354 of 920 tokens after a restart)."""
        return (
            "### machine facts\n"
            f"- model: {self.model}\n"
            f"- slots: {self.slots}\n"
            f"- context per worker: {self.ctx_per_worker} tokens\n"
            f"- prefix reuse: {self.prefix_reuse}"
        )


EXAMPLE_PATH = "path/of/the/file.py"
"""The path of the system message's example block. A model that copies it (the 1.5B coder did,
with a system message that ended on the example) means the file in the chat, not a new file
(`edits.resolve_path`)."""

SYSTEM_PROMPT = f"""\
You are an expert software engineer. You work on the files of one project folder (the \
workspace) to do what the user asks.

To change a file, write its path on a line of its own, then its complete new content in a \
fenced code block:

{EXAMPLE_PATH}
```python
the whole file, every line of it
```

Always give the whole file, never "..." or "rest unchanged". To create a file, do the same with \
its new path. Change only what the task needs; leave the tests alone unless asked. If a file is \
not shown to you, read it with a tool before you change it. When nothing needs changing, or the \
user asked a question, answer in plain words. After your change, say in one sentence what you \
did."""

TOOLS_HEAD = (
    "# Tools\n\nTo see a file that is not shown, to search the workspace or to run a command, "
    "call one of these tools:"
)
TOOLS_TAIL = (
    "Call a tool by writing, on lines of their own:\n<tool_call>\n"
    '{"name": "read_file", "arguments": {"path": "src/app.py"}}\n</tool_call>\n'
    "then stop: its result comes back in the next message. The functions in the workspace's "
    "files are not tools; to change one, write its file."
)
"""The tools as a short list in words, with one call in the `<tool_call>` format Qwen2.5 was
trained on. Not its template's JSON-signature block: with that block in the system message the
0.5B coder "called" the very function it was asked to implement, as a JSON block, on every
HumanEval task tried (bench/agent_humaneval.py); with the list it wrote the code."""


def render_tools(tools: Sequence[ToolSpec]) -> str:
    """The tools part of the system message: one line per tool, then how to call one."""
    lines = [TOOLS_HEAD]
    lines += [f"- {t.signature()}: {t.description}" for t in tools]
    return "\n".join(lines) + "\n\n" + TOOLS_TAIL


def build_stable_prefix(
    tools: Sequence[ToolSpec],
    machine: MachineFacts | None = None,
    project_facts: str = "",
    system_prompt: str = SYSTEM_PROMPT,
) -> str:
    """The system message: identical bytes for every request of every session of a daemon.
    Machine facts are not in it (the model has no use for slot counts); `machine` is kept for
    the callers that pass it."""
    parts = [system_prompt]
    if project_facts.strip():
        parts.append("# Project facts\n" + project_facts.strip())
    parts.append(render_tools(tools))
    return "\n\n".join(parts)


BUDGET_NOTE_STEPS = 2
BUDGET_NOTE_MS = 60_000
"""The budget note goes on a message only when this few steps, or this little time, are left."""


def volatile_tail(step: int, max_steps: int, ms_left: int) -> str:
    """The budget note at the end of a message, once the task is nearly out of steps or time
    (then the model should finish), else nothing. Not on every message: on the 0.5B coder the
    note on the task's first message made first answers two to three times longer (a plan
    before the code, an explanation after it: HumanEval/34 took 9.5 s with it, 2.5 s without),
    and fewer of them passed (16 vs 17 of 40 HumanEval problems, bench/first_answer.py)."""
    if max_steps - step >= BUDGET_NOTE_STEPS and ms_left >= BUDGET_NOTE_MS:
        return ""
    minutes, seconds = divmod(max(0, ms_left) // 1000, 60)
    hours, minutes = divmod(minutes, 60)
    left = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"
    return f"\n\n[step {step} of {max_steps} · {left} left]"


@dataclass(frozen=True)
class PromptMessage:
    role: Role
    text: str
    kind: str = ""
    """task, action, observation, repair, raw, note, summary, carried: for the session and the
    UI (`carried`: a summary left for the next task's message, `PromptPacker.take_carried`)."""


CARRIED = "carried"


@dataclass
class PromptPacker:
    """One session's prompt: frame + stable prefix + messages, kept as a growing string."""

    frame: TemplateFrame
    stable: str
    messages: list[PromptMessage] = field(default_factory=list)
    _text: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        msgs, self.messages = self.messages, []
        self._text = self.frame.start + self.stable + self.frame.system_to_user
        for m in msgs:
            self._append(m)

    def _append(self, m: PromptMessage) -> None:
        last = self.messages[-1].role if self.messages else None
        if m.role == last or (last is None and m.role != "user"):
            raise ValueError(f"messages must alternate user/assistant (got {m.role} after {last})")
        if m.role == "assistant":
            self._text += self.frame.user_to_assistant + m.text
        elif last == "assistant":
            self._text += self.frame.assistant_to_user + m.text
        else:
            self._text += m.text
        self.messages.append(m)

    def set_stable(self, stable: str) -> None:
        """Put a new system message under the same history (a task's own prefix, set before its
        first request); the object stays the same, so its holder sees the task's messages."""
        if stable != self.stable:
            self.stable = stable
            self.__post_init__()

    def add_user(self, text: str, kind: str = "observation") -> None:
        self._append(PromptMessage("user", text, kind))

    def add_assistant(self, text: str, kind: str = "action") -> None:
        self._append(PromptMessage("assistant", text, kind))

    @property
    def awaiting_reply(self) -> bool:
        """The last message is the user's and wants an answer (a carried summary does not)."""
        return bool(self.messages) and self.messages[-1].role == "user" and not self.carries

    @property
    def carries(self) -> bool:
        """The transcript ends with a summary left for the next task's message."""
        return bool(self.messages) and self.messages[-1].kind == CARRIED

    def take_carried(self) -> str:
        """The summary a compaction after the last task left for the next task, taken out of
        the transcript (it goes into that task's message); "" when there is none."""
        if not self.carries:
            return ""
        text = self.messages[-1].text
        self.messages = self.messages[:-1]
        self.__post_init__()
        return text

    def holds(self, text: str) -> bool:
        """Whether the transcript so far holds `text` verbatim."""
        return text in self._text

    @property
    def text(self) -> str:
        """The transcript as the slot holds it, without the generation prompt."""
        return self._text

    def prompt(self) -> str:
        """The prompt for the next completion (ends with the generation prompt)."""
        if not self.awaiting_reply:
            raise ValueError("the last message is not a user message; nothing to answer")
        return self._text + self.frame.user_to_assistant

    def rewound(self, messages: int) -> PromptPacker:
        """A new packer holding only the first `messages` messages: the prompt as it was then,
        a prefix of what the slot holds (a fresh attempt, `retry.py`)."""
        return PromptPacker(self.frame, self.stable, self.messages[:messages])

    def restarted(self, first_user: str, kind: str = "summary") -> PromptPacker:
        """A new packer on the same stable prefix (after a compaction)."""
        p = PromptPacker(self.frame, self.stable)
        p.add_user(first_user, kind=kind)
        return p

    def to_dict(self) -> dict[str, Any]:
        return {
            "frame": self.frame.to_dict(),
            "stable": self.stable,
            "messages": [{"role": m.role, "text": m.text, "kind": m.kind} for m in self.messages],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromptPacker:
        frame = TemplateFrame(**{k: str(v) for k, v in data["frame"].items()})
        msgs = [PromptMessage(m["role"], m["text"], m.get("kind", "")) for m in data["messages"]]
        return cls(frame, str(data["stable"]), msgs)


def observation(tool: str, ok: bool, text: str) -> str:
    """A tool's result as the model was trained to read it."""
    status = "" if ok else f"{tool} failed: "
    return f"<tool_response>\n{status}{text}\n</tool_response>"


def action_text(tool: str, args: dict[str, Any]) -> str:
    """A tool call as the model writes it (for history the app writes on its behalf)."""
    call = json.dumps({"name": tool, "arguments": args}, ensure_ascii=False)
    return f"<tool_call>\n{call}\n</tool_call>"


@dataclass
class ContextMeter:
    """Context use in the server's own token counts; the unsent tail is estimated from them."""

    n_ctx: int
    used_tokens: int = 0
    """Tokens in the slot after the last request: cache_n + prompt_n + predicted_n."""
    prompt_tokens: int = 0
    prompt_chars: int = 0

    def record(self, prompt_chars: int, cache_n: int, prompt_n: int, predicted_n: int) -> None:
        self.prompt_tokens = cache_n + prompt_n
        self.prompt_chars = prompt_chars
        self.used_tokens = self.prompt_tokens + predicted_n

    def estimate(self, prompt_chars: int) -> int:
        """Tokens of a prompt of `prompt_chars` that extends the last measured one."""
        if self.prompt_tokens <= 0 or self.prompt_chars <= 0:
            return prompt_chars // 3  # no measurement yet: pessimistic 3 chars per token
        ratio = self.prompt_chars / self.prompt_tokens
        return self.prompt_tokens + int(max(0, prompt_chars - self.prompt_chars) / ratio) + 1

    def near_limit(self, prompt_chars: int, reserve: int, threshold: float = 0.85) -> bool:
        if self.n_ctx <= 0:
            return False
        return self.estimate(prompt_chars) + reserve >= int(self.n_ctx * threshold)
