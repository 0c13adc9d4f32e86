"""airlock-mcp: a Model Context Protocol server (stdio, JSON-RPC 2.0) that
gives a model two tools, run_python and run_shell, run in the one tier the
operator configured for this server. The model passes code, nothing else:
it cannot pick, widen or see past its sandbox, and this process never runs
the code itself.

One MCP client (this server's stdin and stdout) gets one Airlock session
(PROTOCOL.md, "Sessions"), opened at its first tool call and closed when it
disconnects: the model's variables, imports and files last from one call
to the next. A tier that keeps no sessions (or --no-session) runs each call
as a job of its own, in a fresh sandbox. A session that ends (idle, a
limit...) is replaced at the next call, which says so.

    airlock-mcp --gateway URL --tier untrusted [--timeout 30] [--tools run_python,run_shell]
    (the API key from $AIRLOCK_TOKEN or --token-file; or --redis URL)

Written against the published specification (lifecycle, tools), without an
MCP library: one JSON-RPC message per line on stdin and stdout, logs on
stderr."""
from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import sys
from typing import Any, Dict, List, Optional, TextIO

from .client import AirlockError, Client, Rejected, SessionEnded, tool_answer

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
CODE_MAX = 1 << 20  # the protocol's cap on a job's code


def fenced_text(ans: Dict[str, Any]) -> str:
    """The answer as text a model reads: each stream between fences that
    carry a tag drawn for this call, then the status line after them. The
    job's output cannot close a fence it cannot name, so whatever it prints
    (`exit code: 0 (ok)`, a fake `--- stdout ---`) stays inside its stream."""
    tag = secrets.token_hex(6)
    parts = []
    for name in ("stdout", "stderr"):
        body = ans[name]
        if body and not body.endswith("\n"):
            body += "\n"
        parts.append("<<<%s %s>>>\n%s<<<end %s %s>>>\n" % (name, tag, body, name, tag))
    return "%sexit code: %s (%s) [after the fences tagged %s]" % (
        "".join(parts), ans["exit_code"], ans["status"], tag)

def rich_content(res: Any) -> List[Dict[str, Any]]:
    """What the call made besides text, as MCP content: a figure of a
    session's call, or a *.png a job saved, as an image; another collected
    file as an embedded resource."""
    out = [{"type": "image", "data": base64.b64encode(o.data).decode(), "mimeType": o.mime}
           for o in res.outputs if o.mime.startswith("image/")]
    for path, data in sorted(res.files.items()):
        if path.endswith(".png"):
            out.append({"type": "image", "data": base64.b64encode(data).decode(),
                        "mimeType": "image/png"})
        else:
            out.append({"type": "resource",
                        "resource": {"uri": "file:///work/" + path,
                                     "mimeType": "application/octet-stream",
                                     "blob": base64.b64encode(data).decode()}})
    return out


TOOLS = {
    "run_python": {
        "description": "Run Python 3 code in an isolated sandbox and return its stdout, "
                       "stderr and exit code. The sandbox has no access to this machine, its "
                       "files or its network. The server's instructions say whether variables, "
                       "imports and files last from one call to the next (a session) or each "
                       "call is a fresh sandbox.",
        "arg": "code", "runtime": "python",
        "arg_doc": "The whole Python program to run (print what you want to see).",
    },
    "run_shell": {
        "description": "Run a POSIX shell script (/bin/sh) in an isolated sandbox and return its "
                       "stdout, stderr and exit code. The sandbox has no access to this "
                       "machine, its files or its network; in a session it is the same sandbox "
                       "(and files) as run_python's.",
        "arg": "command", "runtime": "sh",
        "arg_doc": "The shell script to run.",
    },
}

OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"stdout": {"type": "string"}, "stderr": {"type": "string"},
                   "exit_code": {"type": ["integer", "null"]}, "status": {"type": "string"}},
    "required": ["stdout", "stderr", "exit_code", "status"],
}


class Server:
    """The MCP session: one client over one pair of streams."""

    def __init__(self, client: Client, tier: str, timeout: Optional[float], tools: list,
                 out: TextIO, log: TextIO, session: bool = True):
        self.client, self.tier, self.timeout = client, tier, timeout
        self.tools = {n: TOOLS[n] for n in tools}
        self.out, self.log = out, log
        self.version: Optional[str] = None
        self.use_session = session  # until the tier says it keeps none
        self.session: Any = None
        self.note = ""  # said once with the next answer (a session replaced)

    # ---- JSON-RPC ----
    def send(self, msg: Dict[str, Any]) -> None:
        self.out.write(json.dumps(msg, separators=(",", ":")) + "\n")
        self.out.flush()

    def error(self, rid: Any, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def handle_line(self, line: str) -> None:
        line = line.strip()
        if not line:
            return
        try:
            msg = json.loads(line)
        except ValueError as e:
            self.error(None, PARSE_ERROR, "parse error: %s" % e)
            return
        if isinstance(msg, list):  # batches were removed from MCP (2025-06-18)
            self.error(None, INVALID_REQUEST, "invalid request: batches are not supported")
            return
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or \
                not isinstance(msg.get("method", ""), str):
            rid = msg.get("id") if isinstance(msg, dict) else None
            self.error(rid if isinstance(rid, (str, int)) else None, INVALID_REQUEST,
                       "invalid request: expected a JSON-RPC 2.0 object")
            return
        if "method" not in msg:
            if "result" not in msg and "error" not in msg:
                rid = msg.get("id")
                self.error(rid if isinstance(rid, (str, int)) else None, INVALID_REQUEST,
                           "invalid request: no method")
            return  # else a response: we send no requests, so nothing to match
        rid, method = msg.get("id"), msg["method"]
        params = msg.get("params", {})
        if "id" not in msg:  # a notification: never answered
            if method == "notifications/initialized":
                self.log.write("airlock-mcp: session ready (%s)\n" % self.version)
            return
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            self.error(None, INVALID_REQUEST, "invalid request: id must be a string or number")
            return
        if not isinstance(params, dict):
            self.error(rid, INVALID_PARAMS, "invalid params: expected an object")
            return
        handler = {"initialize": self.initialize, "ping": lambda p: {},
                   "tools/list": self.tools_list, "tools/call": self.tools_call}.get(method)
        if handler is None:
            self.error(rid, METHOD_NOT_FOUND, "method not found: %s" % method)
            return
        if method not in ("initialize", "ping") and self.version is None:
            self.error(rid, INVALID_REQUEST, "invalid request: initialize first")
            return
        try:
            result = handler(params)
        except ValueError as e:
            self.error(rid, INVALID_PARAMS, "invalid params: %s" % e)
            return
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    # ---- MCP ----
    def initialize(self, p: Dict[str, Any]) -> Dict[str, Any]:
        asked = p.get("protocolVersion")
        if not isinstance(asked, str):
            raise ValueError("protocolVersion: expected a string")
        self.version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {"protocolVersion": self.version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "airlock-mcp", "version": "0.1.0"},
                "instructions": "Code you pass to %s runs in Airlock's %s sandbox. %s" % (
                    " and ".join(self.tools), self.tier,
                    "One sandbox lasts for this conversation: variables, imports and files "
                    "from earlier calls are there (if it ends, the answer says so and a new "
                    "one starts)." if self.use_session else "One fresh sandbox per call.")}

    def tools_list(self, p: Dict[str, Any]) -> Dict[str, Any]:
        tools = []
        for name, t in self.tools.items():
            d = {"name": name, "description": t["description"],
                 "inputSchema": {"type": "object",
                                 "properties": {t["arg"]: {"type": "string",
                                                           "description": t["arg_doc"]}},
                                 "required": [t["arg"]], "additionalProperties": False}}
            if self.version and self.version >= "2025-06-18":
                d["outputSchema"] = OUTPUT_SCHEMA
            tools.append(d)
        return {"tools": tools}

    def tools_call(self, p: Dict[str, Any]) -> Dict[str, Any]:
        name, args = p.get("name"), p.get("arguments", {})
        if name not in self.tools:
            raise ValueError("unknown tool %r (this server has %s)" % (name, ", ".join(self.tools)))
        t = self.tools[name]
        if not isinstance(args, dict) or set(args) != {t["arg"]} or \
                not isinstance(args[t["arg"]], str):
            raise ValueError("%s takes exactly one argument, %r, a string" % (name, t["arg"]))
        code = args[t["arg"]]
        if not code or len(code.encode()) > CODE_MAX:
            return self.tool_error("%s: %s must be 1 byte to 1 MiB" % (name, t["arg"]))
        try:
            res = self.run(t["runtime"], code)
        except Rejected as e:
            res = e.result
        except AirlockError as e:
            return self.tool_error("the sandbox is not available: %s" % e)
        ans = tool_answer(res, self.client.output_max)
        text = self.note + fenced_text(ans)
        self.note = ""
        out = {"content": [{"type": "text", "text": text}] + rich_content(res),
               "isError": not res.ok}  # a non-zero exit ran: a value, not an error
        if self.version and self.version >= "2025-06-18":
            out["structuredContent"] = ans
        return out

    def run(self, runtime: str, code: str) -> Any:
        """The call in this client's session (opened now if none is), else
        as a job of its own."""
        for _ in (0, 1):
            if self.use_session and self.session is None:
                try:
                    self.session = self.client.session(tier=self.tier, timeout=self.timeout)
                except Rejected as e:
                    if "sessions" in (e.result.error or "") and \
                            not e.result.info.get("quota"):
                        self.use_session = False  # the tier keeps none: jobs, from now on
                        self.log.write("airlock-mcp: tier %s keeps no sessions: one job per "
                                       "call (%s)\n" % (self.tier, e.result.error))
                    else:
                        raise
            if not self.use_session:  # a chart the code saved comes back
                return self.client.run(code, tier=self.tier, runtime=runtime,
                                       timeout=self.timeout, check=False,
                                       collect=["*.png"] if runtime == "python" else None)
            try:
                if runtime == "python":
                    return self.session.run_python(code)
                return self.session.exec(code)
            except SessionEnded as e:
                self.session = None  # a new one, once; the model is told
                self.note = ("(the previous sandbox ended: %s; this is a new one, without "
                             "its variables or files)\n" % e.reason)
        raise AirlockError("the session ended twice in a row")

    def tool_error(self, text: str) -> Dict[str, Any]:
        return {"content": [{"type": "text", "text": text}], "isError": True}

    def serve(self, inp: TextIO) -> None:
        try:
            for line in inp:
                self.handle_line(line)
        finally:  # the client went: its session goes too
            if self.session is not None:
                try:
                    self.session.close()
                except AirlockError as e:
                    self.log.write("airlock-mcp: closing the session: %s\n" % e)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="airlock-mcp", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gateway", help="the gateway's URL (or $AIRLOCK_GATEWAY); the API key "
                                      "from $AIRLOCK_TOKEN or --token-file")
    ap.add_argument("--token-file", help="a file whose first line is the API key")
    ap.add_argument("--redis", help="direct Redis instead (operators; or $AIRLOCK_REDIS)")
    ap.add_argument("--tier", required=True, help="the tier every call runs in (the model "
                                                  "cannot choose another)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="wall-clock seconds per call (default: the tier's)")
    ap.add_argument("--tools", default="run_python,run_shell",
                    help="which tools to offer (default run_python,run_shell)")
    ap.add_argument("--no-session", action="store_true",
                    help="one job per call, even on a tier that keeps sessions")
    ap.add_argument("--output-max", type=int, default=16384,
                    help="bytes of stdout and of stderr the model reads, each: past it, "
                         "the head and tail around a line saying how much was cut "
                         "(default 16384; 0: whole)")
    a = ap.parse_args(argv)
    tools = [x for x in a.tools.split(",") if x]
    bad = [x for x in tools if x not in TOOLS]
    if bad or not tools:
        ap.error("--tools: expected some of %s, not %s" % (", ".join(TOOLS), ", ".join(bad)))
    if a.timeout is not None and a.timeout <= 0:
        ap.error("--timeout: expected seconds > 0")
    if a.output_max < 0:
        ap.error("--output-max: expected bytes >= 0")
    token = os.environ.get("AIRLOCK_TOKEN")
    if a.token_file:
        with open(a.token_file) as f:
            token = f.readline().strip()
    try:
        client = Client(gateway=a.gateway, token=token, redis=a.redis,
                        output_max=a.output_max)
    except (ValueError, AirlockError) as e:
        ap.error(str(e))
    # stdout carries only protocol messages
    Server(client, a.tier, a.timeout, tools, sys.stdout, sys.stderr,
           session=not a.no_session).serve(sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
