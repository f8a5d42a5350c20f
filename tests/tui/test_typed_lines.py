"""The user's own message is drawn with its line breaks; the model's answer is Markdown as
written (the lines of a paragraph join)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from fusion_tui.tui.widgets.chat_message import ChatMessage

PASTED = "names:\nada\ngrace\n\n```\nx = 1\n```"


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield ChatMessage("user", PASTED, id="user")
        yield ChatMessage("assistant", PASTED, id="model")


def paragraph(app: App[None], message: str) -> str:
    return str(app.query_one(f"#{message}").query("MarkdownParagraph").first().render())


async def test_a_pasted_message_keeps_its_lines_and_an_answer_is_markdown() -> None:
    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        assert paragraph(app, "user") == "names:\nada\ngrace"
        assert paragraph(app, "model") == "names: ada grace"
