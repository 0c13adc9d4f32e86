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

    airlock-mcp --gateway URL --tier untrusted [--timeout 30] [--image datascience]
                [--tools run_python,run_shell] [--output-max 16384]
    (the API key from $AIRLOCK_TOKEN or --token-file; or --redis URL)

Each tool takes its code and, optionally, files (path to text, written
first) and collect (paths or globs brought back: PNGs as images, other
files as embedded resources). Requests are served as they come (a call on
a thread of its own, a session's calls one at a time): ping, tools/list
and notifications/cancelled (which cancels the call's job, or interrupts
its call in the session) are answered
during a long call; a progress token gets notifications/progress from the
call's live output; batches are taken in 2025-03-26; a bad argument is a
tool error (isError) the model reads.

Written against the published specification (lifecycle, tools, progress,
cancellation), without an MCP library: one JSON-RPC message per line on
stdin and stdout, logs on stderr; tested with the official TypeScript
SDK's client too."""
from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import sys
import threading
import uuid
from typing import Any, Callable, Dict, List, Optional, TextIO

from .client import AirlockError, Cancelled, Client, Rejected, Result, SessionEnded
from .session import Session
from .llm import tool_answer

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
                       "call is a fresh sandbox. Charts the code saves as PNG (or leaves open, "
                       "in a session) come back as images.",
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
FILES_DOC = ("Files to write in the working directory before running: relative path to "
             "text content.")
COLLECT_DOC = ("Files to return after running: relative paths or globs such as 'out/*.csv' "
               "(PNG images come back as images, other files as resources).")
FILES_MAX, COLLECT_MAX = 64, 15

OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"stdout": {"type": "string"}, "stderr": {"type": "string"},
                   "exit_code": {"type": ["integer", "null"]}, "status": {"type": "string"}},
    "required": ["stdout", "stderr", "exit_code", "status"],
}


class Call:
    """A tools/call in flight: run() makes its answer (work(call) is its
    result; done() when it is over). Cancelled by notifications/cancelled
    (its job cancelled too, when it runs as one), it has no answer."""

    def __init__(self, rid: Any, work: Callable[["Call"], Dict[str, Any]],
                 done: Callable[[], Any]):
        self.rid, self.work, self.done = rid, work, done
        self.cancelled = False
        self.job: Optional[str] = None
        self.in_session: Any = None  # (the session, its call's id) while it runs in one
        self.answer: Optional[Dict[str, Any]] = None

    def run(self) -> Optional[Dict[str, Any]]:
        result = self.work(self)
        self.done()
        if not self.cancelled:  # a cancelled request is not answered
            self.answer = {"jsonrpc": "2.0", "id": self.rid, "result": result}
        return self.answer


class Server:
    """The MCP session: one client over one pair of streams. Requests are
    read as they come: a tools/call runs on a thread of its own (so that a
    ping, a tools/list or a cancel is answered while it runs; the calls of
    one session still run one at a time, in order), everything else at
    once."""

    def __init__(self, client: Client, tier: str, timeout: Optional[float], tools: list,
                 out: TextIO, log: TextIO, session: bool = True, image: Optional[str] = None,
                 session_id: Optional[str] = None, on_exit: str = "close"):
        self.client, self.tier, self.timeout = client, tier, timeout
        self.on_exit = on_exit  # what the client's going does to its session: close, pause
        self.image = image  # the catalogue image of its session and jobs (None: the tier's)
        self.tools = {n: TOOLS[n] for n in tools}
        self.out, self.log = out, log
        self.version: Optional[str] = None
        self.use_session = session  # until the tier says it keeps none
        # --session: an earlier one (paused: its first call resumes it)
        self.session: Any = Session(client, session_id, tier) if session_id else None
        self.note = ""  # said once with the next answer (a session replaced)
        self.out_lock = threading.Lock()
        self.session_lock = threading.Lock()  # one call at a time in the session
        self.calls: Dict[Any, Call] = {}
        self.threads: List[threading.Thread] = []

    # ---- JSON-RPC ----
    def send(self, msg: Any) -> None:
        with self.out_lock:
            self.out.write(json.dumps(msg, separators=(",", ":")) + "\n")
            self.out.flush()

    @staticmethod
    def error(rid: Any, code: int, message: str) -> Dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}

    def handle_line(self, line: str) -> None:
        line = line.strip()
        if not line:
            return
        try:
            msg = json.loads(line)
        except ValueError as e:
            self.send(self.error(None, PARSE_ERROR, "parse error: %s" % e))
            return
        if isinstance(msg, list):
            self.batch(msg)
            return
        answer = self.dispatch(msg)
        if isinstance(answer, Call):
            call = answer
            self.spawn(lambda: call.run() and self.send(call.answer))
        elif answer is not None:
            self.send(answer)

    def batch(self, msgs: list) -> None:
        """A JSON-RPC batch: only in 2025-03-26 (later versions removed
        them); its answers go together, once every request in it is done."""
        if self.version != "2025-03-26" or not msgs:
            self.send(self.error(None, INVALID_REQUEST, "invalid request: %s" % (
                "an empty batch" if msgs and self.version == "2025-03-26" or not msgs else
                "batches are part of MCP 2025-03-26 only (this session: %s)" % self.version)))
            return
        answers = [self.dispatch(m) for m in msgs]
        threads = [self.spawn(a.run) for a in answers if isinstance(a, Call)]

        def finish() -> None:
            for th in threads:
                th.join()
            got = [a.answer if isinstance(a, Call) else a for a in answers]
            got = [a for a in got if a is not None]
            if got:
                self.send(got)
        if threads:
            self.spawn(finish)
        else:
            finish()

    def dispatch(self, msg: Any) -> Any:
        """One message: its answer now, None (a notification, a response), or
        a Call (a tools/call: its run() makes its answer)."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or \
                not isinstance(msg.get("method", ""), str):
            rid = msg.get("id") if isinstance(msg, dict) else None
            return self.error(rid if isinstance(rid, (str, int)) else None, INVALID_REQUEST,
                              "invalid request: expected a JSON-RPC 2.0 object")
        if "method" not in msg:
            if "result" not in msg and "error" not in msg:
                rid = msg.get("id")
                return self.error(rid if isinstance(rid, (str, int)) else None,
                                  INVALID_REQUEST, "invalid request: no method")
            return None  # a response: we send no requests, so nothing to match
        rid, method = msg.get("id"), msg["method"]
        params = msg.get("params", {})
        if "id" not in msg:  # a notification: never answered
            if method == "notifications/initialized":
                self.log.write("airlock-mcp: session ready (%s)\n" % self.version)
            elif method == "notifications/cancelled" and isinstance(params, dict):
                self.cancel(params.get("requestId"), params.get("reason"))
            return None
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            return self.error(None, INVALID_REQUEST,
                              "invalid request: id must be a string or number")
        if not isinstance(params, dict):
            return self.error(rid, INVALID_PARAMS, "invalid params: expected an object")
        handler = {"initialize": self.initialize, "ping": lambda p: {},
                   "tools/list": self.tools_list}.get(method)
        if handler is None and method != "tools/call":
            return self.error(rid, METHOD_NOT_FOUND, "method not found: %s" % method)
        if method not in ("initialize", "ping") and self.version is None:
            return self.error(rid, INVALID_REQUEST, "invalid request: initialize first")
        if method == "tools/call":
            if params.get("name") not in self.tools:  # unknown tool: a protocol error
                return self.error(rid, INVALID_PARAMS, "invalid params: unknown tool %r (this "
                                  "server has %s)" % (params.get("name"), ", ".join(self.tools)))
            call = self.calls[rid] = Call(rid, lambda c: self.tools_call(params, c),
                                          lambda: self.calls.pop(rid, None))
            return call
        try:
            result = handler(params)
        except ValueError as e:
            return self.error(rid, INVALID_PARAMS, "invalid params: %s" % e)
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def spawn(self, fn: Callable[[], None]) -> threading.Thread:
        th = threading.Thread(target=fn, daemon=True)
        self.threads = [x for x in self.threads if x.is_alive()] + [th]
        th.start()
        return th

    def cancel(self, rid: Any, reason: Any) -> None:
        call = self.calls.get(rid)
        if call is None:
            return  # done already, or never was: nothing to do
        call.cancelled = True
        self.log.write("airlock-mcp: request %r cancelled (%s)%s\n" % (
            rid, reason, ": cancelling job %s" % call.job if call.job else ""))
        if call.in_session:  # interrupted now: the next call starts at once
            session, cid = call.in_session
            try:
                session.cancel(cid)
            except AirlockError as e:
                self.log.write("airlock-mcp: cancelling call %s: %s\n" % (cid, e))
        if call.job:
            try:
                self.client.cancel(call.job)
            except AirlockError as e:
                self.log.write("airlock-mcp: cancelling %s: %s\n" % (call.job, e))

    # ---- MCP ----
    def initialize(self, p: Dict[str, Any]) -> Dict[str, Any]:
        asked = p.get("protocolVersion")
        if not isinstance(asked, str):
            raise ValueError("protocolVersion: expected a string")
        self.version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {"protocolVersion": self.version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "airlock-mcp", "version": "0.2.0"},
                "instructions": "Code you pass to %s runs in Airlock's %s sandbox. %s" % (
                    " and ".join(self.tools), self.tier,
                    "One sandbox lasts for this conversation: variables, imports and files "
                    "from earlier calls are there (if it ends, the answer says so and a new "
                    "one starts)." if self.use_session else "One fresh sandbox per call.")}

    def tools_list(self, p: Dict[str, Any]) -> Dict[str, Any]:
        tools = []
        for name, t in self.tools.items():
            d = {"name": name, "description": t["description"],
                 "inputSchema": {
                     "type": "object",
                     "properties": {
                         t["arg"]: {"type": "string", "description": t["arg_doc"]},
                         "files": {"type": "object", "description": FILES_DOC,
                                   "additionalProperties": {"type": "string"}},
                         "collect": {"type": "array", "description": COLLECT_DOC,
                                     "items": {"type": "string"}, "maxItems": COLLECT_MAX}},
                     "required": [t["arg"]], "additionalProperties": False}}
            if self.version and self.version >= "2025-06-18":
                d["outputSchema"] = OUTPUT_SCHEMA
            tools.append(d)
        return {"tools": tools}

    def check_args(self, name: str, args: Any) -> Optional[str]:
        """Why the arguments are not what the tool takes (None: they are)."""
        t = self.tools[name]
        if not isinstance(args, dict):
            return "%s: arguments must be an object" % name
        extra = set(args) - {t["arg"], "files", "collect"}
        if extra:
            return "%s: unknown argument %s (it takes %s, and optionally files and collect)" % (
                name, ", ".join(sorted(extra)), t["arg"])
        code = args.get(t["arg"])
        if not isinstance(code, str) or not code or len(code.encode()) > CODE_MAX:
            return "%s: %s must be a string of 1 byte to 1 MiB" % (name, t["arg"])
        files = args.get("files", {})
        if not isinstance(files, dict) or len(files) > FILES_MAX or \
                not all(isinstance(k, str) and k and not k.startswith("/") and
                        ".." not in k.split("/") and isinstance(v, str)
                        for k, v in files.items()):
            return ("%s: files must map at most %d relative paths (no '..') to text"
                    % (name, FILES_MAX))
        collect = args.get("collect", [])
        if not isinstance(collect, list) or len(collect) > COLLECT_MAX or \
                not all(isinstance(c, str) and c and not c.startswith("/") and
                        ".." not in c.split("/") for c in collect):
            return ("%s: collect must be at most %d relative paths or globs (no '..')"
                    % (name, COLLECT_MAX))
        return None

    def tools_call(self, p: Dict[str, Any], call: Call) -> Dict[str, Any]:
        name, args = p.get("name"), p.get("arguments", {})
        bad = self.check_args(name, args)
        if bad:  # the model's mistake: a tool error it can read and mend
            return self.tool_error(bad)
        t = self.tools[name]
        token = (p.get("_meta") or {}).get("progressToken") if isinstance(
            p.get("_meta"), dict) else None
        progress = self.progress_fn(token) if isinstance(token, (str, int)) else None
        try:
            res = self.run(t["runtime"], args[t["arg"]],
                           {k: v.encode() for k, v in args.get("files", {}).items()},
                           args.get("collect", []), call, progress)
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

    def progress_fn(self, token: Any) -> Callable[[str, bytes], None]:
        """notifications/progress for a call whose request carried a
        progress token: one per chunk of live output, its last line as the
        message, the bytes so far as the progress."""
        seen = [0]

        def fn(kind: str, data: bytes) -> None:
            seen[0] += len(data)
            lines = data.decode(errors="replace").strip().splitlines()
            self.send({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": token, "progress": seen[0],
                                  "message": "%s: %s" % (kind, lines[-1][:200] if lines
                                                         else "")}})
        return fn

    def run(self, runtime: str, code: str, files: Dict[str, bytes], collect: List[str],
            call: Call, progress: Optional[Callable[[str, bytes], None]]) -> Any:
        """The call in this client's session (opened now if none is), else
        as a job of its own."""
        with self.session_lock:
            for _ in (0, 1):
                if self.use_session and self.session is None:
                    try:
                        extra = {"image": self.image} if self.image else {}
                        self.session = self.client.session(tier=self.tier,
                                                           timeout=self.timeout, **extra)
                    except Rejected as e:
                        if "sessions" in (e.result.error or "") and \
                                not e.result.info.get("quota"):
                            self.use_session = False  # the tier keeps none: jobs from now on
                            self.log.write("airlock-mcp: tier %s keeps no sessions: one job "
                                           "per call (%s)\n" % (self.tier, e.result.error))
                        else:
                            raise
                if not self.use_session:
                    break
                try:
                    fn = self.session.run_python if runtime == "python" else self.session.exec
                    cid = uuid.uuid4().hex
                    call.in_session = (self.session, cid)
                    if call.cancelled:  # before it was sent: it is not
                        raise Cancelled(Result(id=cid, status="cancelled",
                                               error="cancelled before it ran"))
                    return fn(code, files=files, collect=collect, on_output=progress,
                              output_max=self.client.output_max or None, call_id=cid)
                except SessionEnded as e:
                    self.session = None  # a new one, once; the model is told
                    self.note = ("(the previous sandbox ended: %s; this is a new one, "
                                 "without its variables or files)\n" % e.reason)
            if self.use_session:
                raise AirlockError("the session ended twice in a row")
        # one job: a chart the code saved comes back
        want = (["*.png"] if runtime == "python" else []) + \
            [c for c in collect if c != "*.png"]
        call.job = self.client.submit(code, tier=self.tier, runtime=runtime,
                                      timeout=self.timeout, files=files or None,
                                      collect=want or None,
                                      **({"image": self.image} if self.image else {}))
        if call.cancelled:
            self.client.cancel(call.job)
        if progress:
            for ch in self.client.stream(call.job):
                if ch.kind in ("stdout", "stderr"):
                    progress(ch.kind, ch.data)
        return self.client.wait(call.job)

    @staticmethod
    def tool_error(text: str) -> Dict[str, Any]:
        return {"content": [{"type": "text", "text": text}], "isError": True}

    def serve(self, inp: TextIO) -> None:
        try:
            for line in inp:
                self.handle_line(line)
        finally:  # the client went: its calls end (their time), then its session
            for th in list(self.threads):
                th.join()
            if self.session is not None and self.on_exit == "pause":
                try:  # kept for the next conversation: --session ID resumes it
                    self.session.pause()
                    self.log.write("airlock-mcp: session %s paused (airlock-mcp --session %s "
                                   "resumes it)\n" % (self.session.id, self.session.id))
                    self.session = None
                except AirlockError as e:
                    self.log.write("airlock-mcp: pausing the session: %s; closing it\n" % e)
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
    ap.add_argument("--image", help="the catalogue image its session (and jobs) run in, one "
                                    "the tier offers (default: the tier's), e.g. datascience")
    ap.add_argument("--no-session", action="store_true",
                    help="one job per call, even on a tier that keeps sessions")
    ap.add_argument("--output-max", type=int, default=16384,
                    help="bytes of stdout and of stderr the model reads, each: past it, "
                         "the head and tail around a line saying how much was cut "
                         "(default 16384; 0: whole)")
    ap.add_argument("--session", metavar="ID",
                    help="go on in this session (one an earlier airlock-mcp paused: its "
                         "first call resumes it) instead of opening one")
    ap.add_argument("--on-exit", choices=("close", "pause"), default="close",
                    help="when the MCP client goes: close its session (default), or pause "
                         "it (a microVM tier: saved whole, its sandbox freed) for --session")
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
           session=not a.no_session, image=a.image, session_id=a.session,
           on_exit=a.on_exit).serve(sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
