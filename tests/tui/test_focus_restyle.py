"""Moving the focus into or out of the chat restyles a few nodes, not every block of a long
answer (Textual restyles a focused widget's whole subtree by default)."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Input

from fusion_tui.config import Settings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_view import ChatView
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.tui.scripted_backend import ScriptedBackend

LONG = "".join(f"Paragraph {n} of a long answer, with `code` and **bold**.\n\n" for n in range(150))


def _count_restyled(app: Any) -> list[int]:
    counts: list[int] = []
    update_nodes = app.stylesheet.update_nodes

    def counting(nodes: Any, animate: bool = False) -> None:
        nodes = list(nodes)
        counts.append(len(nodes))
        update_nodes(nodes, animate=animate)

    app.stylesheet.update_nodes = counting
    return counts


async def test_focus_in_and_out_of_a_long_chat_restyles_few_nodes() -> None:
    app = build_app(Settings(), ScriptedBackend([]))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        view = app.screen.query_one(ChatView)
        await view.add_message("assistant", LONG)
        await pilot.pause()
        assert len(list(view.walk_children())) > 150
        counts = _count_restyled(app)
        view.focus()
        await pilot.pause()
        assert app.focused is view
        app.screen.query_one(PromptInput).focus()
        await pilot.pause()
        assert counts and max(counts) < 20, counts


class Host(App[None]):
    CSS = "ChatView:focus { background-tint: red 20%; }"

    def compose(self) -> ComposeResult:
        yield ChatView()
        yield Input()


async def test_a_focus_rule_of_the_view_still_applies() -> None:
    app = Host()
    async with app.run_test() as pilot:
        view = app.query_one(ChatView)
        app.query_one(Input).focus()
        await pilot.pause()
        blurred = view.styles.background_tint
        view.focus()
        await pilot.pause()
        assert view.styles.background_tint != blurred
        app.query_one(Input).focus()
        await pilot.pause()
        assert view.styles.background_tint == blurred
