"""Provides the model's chat template as a frame: the pieces that go between messages.

Why client-side assembly from a probed frame (and not `/apply-template` per request): the model's
own chat template is rendered by the server, once per daemon, on sentinel messages; the pieces
between the sentinels (turn headers, end-of-turn markers, the generation prompt) are then
concatenated around our text. Re-rendering the whole history every request would let a template
that trims content, injects today's date or drops old reasoning rewrite bytes the slot already
holds, and the KV cache would be re-read from that point. With the frame, every request's prompt
is the previous one plus the model's own output plus new text: an exact extension. The chat and
the agent both build their prompts on it; it lives with the server, which renders it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fusion_tui.server.connect import Connection

ApplyTemplate = Callable[[list[dict[str, str]]], Awaitable[str]]
"""POST /apply-template {"messages": [...]} → the rendered "prompt" string."""

_SENTINELS = ("FUSIONSYSQ7", "FUSIONUSRQ1", "FUSIONASTQ1", "FUSIONUSRQ2")


class TemplateProbeError(Exception):
    """The chat template could not be split into reusable pieces."""


@dataclass(frozen=True)
class TemplateFrame:
    """The model's chat template, cut into the pieces that go between messages."""

    start: str
    system_to_user: str
    user_to_assistant: str
    """End of a user turn plus the generation prompt (assistant header)."""
    assistant_to_user: str
    """End of an assistant turn plus the next user header."""

    @classmethod
    def chatml(cls) -> TemplateFrame:
        """ChatML (SmolLM2, Qwen): the fallback when no server can be asked."""
        return cls(
            start="<|im_start|>system\n",
            system_to_user="<|im_end|>\n<|im_start|>user\n",
            user_to_assistant="<|im_end|>\n<|im_start|>assistant\n",
            assistant_to_user="<|im_end|>\n<|im_start|>user\n",
        )

    @classmethod
    async def probe(cls, apply_template: ApplyTemplate) -> TemplateFrame:
        """Render sentinel messages with the server's template and cut between them."""
        s, u1, a1, u2 = _SENTINELS
        rendered = await apply_template(
            [
                {"role": "system", "content": s},
                {"role": "user", "content": u1},
                {"role": "assistant", "content": a1},
                {"role": "user", "content": u2},
            ]
        )
        return cls.from_rendered(rendered)

    @classmethod
    def from_rendered(cls, rendered: str) -> TemplateFrame:
        s, _u1, a1, u2 = _SENTINELS
        at = []
        pos = 0
        for token in _SENTINELS:
            i = rendered.find(token, pos)
            if i < 0:
                raise TemplateProbeError(
                    f"the chat template dropped or reordered a probe message ({token}); "
                    "this model's template cannot be used for byte-stable packing"
                )
            at.append(i)
            pos = i + len(token)
        return cls(
            start=rendered[: at[0]],
            system_to_user=rendered[at[0] + len(s) : at[1]],
            user_to_assistant=rendered[at[3] + len(u2) :],
            assistant_to_user=rendered[at[2] + len(a1) : at[3]],
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "start": self.start,
            "system_to_user": self.system_to_user,
            "user_to_assistant": self.user_to_assistant,
            "assistant_to_user": self.assistant_to_user,
        }


_FRAMES: dict[tuple[str, str, str], TemplateFrame] = {}
"""Template frames by daemon (url, model, launch); a frame is fixed for a daemon's lifetime."""


def daemon_key(conn: Connection) -> tuple[str, str, str]:
    return (conn.client.base_url, conn.props.model_path, conn.launch_id or conn.props.build_info)


async def template_frame(
    conn: Connection, cache: dict[tuple[str, str, str], TemplateFrame] | None = None
) -> TemplateFrame:
    """The model's template frame, probed once per daemon (`TemplateProbeError` if unusable)."""
    frames = _FRAMES if cache is None else cache
    key = daemon_key(conn)
    frame = frames.get(key)
    if frame is None:
        frame = frames[key] = await TemplateFrame.probe(conn.client.apply_template)
    return frame
