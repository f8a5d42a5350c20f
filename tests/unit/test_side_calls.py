"""SideCallQueue: side calls wait for turns, a starting turn cancels a running one, reruns."""

from __future__ import annotations

import anyio

from fusion_tui.slots.side_calls import SideCallQueue


async def test_side_call_waits_for_the_turn() -> None:
    queue = SideCallQueue()
    order: list[str] = []

    async def title() -> str:
        order.append("title")
        return "T"

    results: list[str | None] = []
    async with anyio.create_task_group() as tg, queue.turn():
        tg.start_soon(lambda: _collect(queue, title, results))
        await anyio.sleep(0.01)
        order.append("turn done")
    assert order == ["turn done", "title"] and results == ["T"]


async def _collect(queue: SideCallQueue, call: object, out: list[str | None]) -> None:
    out.append(await queue.submit(call))  # type: ignore[arg-type]


async def test_a_turn_cancels_a_running_side_call_and_it_reruns() -> None:
    queue = SideCallQueue()
    started: list[int] = []
    release = anyio.Event()

    async def title() -> str:
        started.append(len(started))
        if len(started) == 1:
            await anyio.sleep(10)  # cut short by the turn below
        await release.wait()
        return "T"

    results: list[str | None] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _collect(queue, title, results))
        await anyio.sleep(0.01)
        assert started == [0]
        async with queue.turn():
            await anyio.sleep(0.01)
            assert started == [0]  # not rerun while the turn runs
        release.set()
    assert started == [0, 1] and results == ["T"] and queue.cancelled == 1


async def test_gives_up_after_max_reruns() -> None:
    queue = SideCallQueue(max_reruns=1)

    async def title() -> str:
        await anyio.sleep(10)
        return "never"

    results: list[str | None] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _collect(queue, title, results))
        for _ in range(2):
            await anyio.sleep(0.01)
            async with queue.turn():
                await anyio.sleep(0.01)
    assert results == [None] and queue.cancelled == 2
