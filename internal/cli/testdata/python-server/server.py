"""A small MCP server over stdio, in plain Python with no packages.

It speaks JSON-RPC 2.0, one message per line, and offers one tool, echo,
which returns its message together with the Python version that ran it.
MST's docker tests run it in the Python worker image.
"""

import json
import platform
import sys

ECHO = {
    "name": "echo",
    "description": "Echo a message back.",
    "inputSchema": {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "The message to echo."}},
        "required": ["message"],
    },
}


def answer(request):
    """Returns the result of a request, or raises LookupError for an unknown method."""
    method = request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "python-echo", "version": "1.0.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [ECHO]}
    if method == "tools/call":
        if params.get("name") != "echo":
            return {"isError": True, "content": [{"type": "text", "text": "unknown tool " + str(params.get("name"))}]}
        message = str((params.get("arguments") or {}).get("message", ""))
        text = message + " (echoed by Python " + platform.python_version() + ")"
        return {"content": [{"type": "text", "text": text}]}
    raise LookupError(method)


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification: nothing to answer
        reply = {"jsonrpc": "2.0", "id": request["id"]}
        try:
            reply["result"] = answer(request)
        except LookupError:
            reply["error"] = {"code": -32601, "message": "method not found: " + str(request.get("method"))}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
