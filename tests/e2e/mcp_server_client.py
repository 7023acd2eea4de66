# The official MCP Python SDK as a client of hearth's MCP server (tests/e2e/mcp_server.rs).
#
# argv[1] is a JSON plan: {"transport": "http", "url": ..., "headers": {...}} or
# {"transport": "stdio", "command": ..., "args": [...], "cwd": ..., "env": {...}}, and "steps",
# each {"op": "list_tools" | "list_resources" | "list_prompts" | "get_prompt" | "read" |
# "call", ...}; a call with "progress": true asks for progress and returns its notes. Prints
# one JSON object: {"results": [...], "error": "..."?}, every result as the SDK parsed it (by
# alias, so `isError`, `readOnlyHint`), for a failure its text, and over HTTP the status of
# every response (the SDK itself reports a 401 only as "an error response").

import asyncio
import json
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation


def dump(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def describe(error):
    """The error and everything inside it (anyio raises groups), with HTTP statuses."""
    parts = []
    stack = [error]
    while stack:
        e = stack.pop()
        parts.append(f"{type(e).__name__}: {e}")
        response = getattr(e, "response", None)
        status = getattr(response, "status_code", None)
        if status is not None:
            parts.append(f"HTTP {status}")
        stack.extend(getattr(e, "exceptions", []) or [])
        if e.__cause__ is not None:
            stack.append(e.__cause__)
    return " | ".join(parts)


async def run(client, steps, out):
    for step in steps:
        op = step["op"]
        if op == "list_tools":
            result = await client.list_tools()
        elif op == "list_resources":
            result = await client.list_resources()
        elif op == "list_prompts":
            result = await client.list_prompts()
        elif op == "get_prompt":
            result = await client.get_prompt(step["name"])
        elif op == "read":
            result = await client.read_resource(step["uri"])
        elif op == "call":
            # With "progress": the call asks for progress, and its notes come back with it.
            notes = []

            async def note(progress, total, message):
                notes.append(message)

            callback = note if step.get("progress") else None
            result = await client.call_tool(
                step["name"], step.get("args", {}), progress_callback=callback
            )
            if callback is not None:
                out.append({**dump(result), "progress": notes})
                continue
        else:
            raise ValueError(f"unknown op {op}")
        out.append(dump(result))


async def main():
    plan = json.loads(sys.argv[1])
    out = []
    statuses = []

    async def record(response):
        statuses.append(response.status_code)

    me = Implementation(name="hearth-pytest", version="1.0")
    try:
        if plan["transport"] == "http":
            http = httpx2.AsyncClient(
                headers=plan.get("headers", {}),
                timeout=httpx2.Timeout(30, read=300),
                event_hooks={"response": [record]},
            )
            async with http:
                transport = streamable_http_client(plan["url"], http_client=http)
                async with Client(transport, cache=None, client_info=me) as client:
                    await run(client, plan["steps"], out)
        else:
            server = StdioServerParameters(
                command=plan["command"],
                args=plan["args"],
                cwd=plan.get("cwd"),
                env=plan.get("env"),
            )
            async with Client(server, cache=None, client_info=me) as client:
                await run(client, plan["steps"], out)
    except BaseException as error:  # noqa: BLE001 - the test reads what failed
        print(json.dumps({"results": out, "error": describe(error), "statuses": statuses}))
        return
    print(json.dumps({"results": out, "statuses": statuses}))


asyncio.run(main())
