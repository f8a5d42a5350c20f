"""`LlamaClient.apply_template` against an `httpx.MockTransport` (no server)."""

from __future__ import annotations

import json

import httpx
import pytest

from fusion_tui.server.errors import ProtocolError, ServerHTTPError
from fusion_tui.server.http.client import LlamaClient

BASE = "http://127.0.0.1:9"
MESSAGES = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]


async def test_posts_the_messages_and_returns_the_rendered_prompt() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content)
        rendered = "".join(f"<{m['role']}>{m['content']}" for m in body["messages"]) + "<gen>"
        return httpx.Response(200, json={"prompt": rendered})

    async with LlamaClient(BASE, transport=httpx.MockTransport(handler)) as client:
        prompt = await client.apply_template(MESSAGES)
    assert prompt == "<system>S<user>U<gen>"
    assert len(seen) == 1
    assert seen[0].method == "POST"
    assert seen[0].url.path == "/apply-template"
    assert json.loads(seen[0].content) == {"messages": MESSAGES}


@pytest.mark.parametrize("answer", [{"prompt": 3}, {"text": "x"}, ["x"]])
async def test_an_answer_without_a_prompt_string_is_a_protocol_error(answer: object) -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json=answer))
    async with LlamaClient(BASE, transport=transport) as client:
        with pytest.raises(ProtocolError, match="apply-template"):
            await client.apply_template(MESSAGES)


async def test_a_server_without_the_endpoint_raises_a_typed_http_error() -> None:
    err = {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}
    transport = httpx.MockTransport(lambda r: httpx.Response(404, json=err))
    async with LlamaClient(BASE, transport=transport) as client:
        with pytest.raises(ServerHTTPError) as info:
            await client.apply_template(MESSAGES)
    assert info.value.status == 404
