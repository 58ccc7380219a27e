"""A litmus world as an MCP server over stdio (the ``mcp`` SDK's low-level server): ``tools/list`` answers
with the world's tools, each ``tools/call`` is a :class:`.live_calls.LiveCalls` call, and a call refused
before any world saw it is an MCP error response.

The SDK is imported here only, so nothing else needs the ``mcp`` extra. Calls are made one at a time,
in the order they arrive: the worlds are stateful, and a pair's meaning depends on the calls before it.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from litmus_replay.envs.quiet_stdout import quiet_stdout

from . import __version__
from .live_calls import LiveCalls, RefusedCall

__all__ = ["serve_stdio", "world_server"]


def world_server(calls: LiveCalls, name: str) -> Server[Any]:
    """The MCP server of one open world pair."""
    listed = [types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema)
              for tool in calls.tools.values()]
    one_at_a_time = anyio.Lock()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        async with one_at_a_time:
            try:
                with quiet_stdout():  # what a domain's code prints is not the protocol's
                    result = calls.call(ctx.request_id, params.name, params.arguments)
            except RefusedCall as refused:
                raise MCPError(refused.code, refused.message) from None
        return types.CallToolResult.model_validate(result)

    return Server(name, version=__version__,
                  instructions="Every call is executed in this world and judged at proposal and at commit.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve_stdio(calls: LiveCalls, name: str) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes them."""
    server = world_server(calls, name)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)
