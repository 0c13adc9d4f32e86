# session_server.py - the server inside a session's sandbox (worker/sessions.c
# runs it as the session's job; PROTOCOL.md, "Sessions"). It reaches the
# worker through the abstract unix socket of its own network namespace
# (process, container), or the VM's session port its agent gave it on fd 4
# (microVM), and serves one call at a time: exec (a program or a shell line), python (into
# one interpreter whose globals persist), put, get, ls. Frames both ways are a
# 4-byte big-endian length and a JSON object; bytes travel as NAME_base64.
# Everything here runs with the session's code, inside its sandbox: the
# worker trusts none of what it says (it bounds and checks every frame).
import ast
import base64
import builtins
import io
import json
import linecache
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback

os.environ.setdefault("MPLBACKEND", "Agg")
WORK = os.getcwd()
SERVER_FILE = sys._getframe(0).f_code.co_filename  # this code's name, as run
FRAME_MAX = 32 << 20

class Port:
    """The microVM's virtio port (a character device on fd 4): a stream,
    read and written as a socket would be."""

    def __init__(self, fd):
        self.fd = fd

    def recv(self, n):
        return os.read(self.fd, n)

    def sendall(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


def connect():
    try:
        import stat
        if stat.S_ISCHR(os.fstat(4).st_mode):
            return Port(4)
    except OSError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # runsc: the worker's socket is a file (its Sentry's network stack is its
    # own); elsewhere an abstract name in the sandbox's network namespace
    on_runsc = os.path.exists("/.airlock/session.sock")
    s.connect("/.airlock/session.sock" if on_runsc else "\0airlock-session")
    return s


conn = None  # the worker's: connect() in the process that serves


def forget_conn():
    """A child forked by the session's code (os.fork, multiprocessing) keeps
    no copy of the connection: it is the server's alone, and a copy would
    hold it open after the server lets it go (release)."""
    global conn
    if conn is not None and hasattr(conn, "detach"):
        try:
            conn.close()
        except OSError:
            pass
    conn = None


os.register_at_fork(after_in_child=forget_conn)
send_lock = threading.Lock()
requests = queue.Queue()
current = {"kind": None, "proc": None, "interrupted": False}


def send(doc):
    data = json.dumps(doc).encode()
    with send_lock:
        conn.sendall(struct.pack(">I", len(data)) + data)


def recv_exact(n):
    buf = b""
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return buf


def reader():
    """Requests to the main thread; an interrupt acts at once."""
    while True:
        head = recv_exact(4)
        if head is None:
            break
        n = struct.unpack(">I", head)[0]
        if n > FRAME_MAX:
            break
        body = recv_exact(n)
        if body is None:
            break
        req = json.loads(body)
        if req.get("op") == "interrupt":
            interrupt()
        elif req.get("op") == "reseed":
            reseed()
        elif req.get("op") == "release":
            release()
        else:
            requests.put(req)
    os._exit(0)  # the worker went away: the session is over


def release():
    """A runsc sandbox about to be saved (its checkpoint cannot hold a host
    socket that is connected): the connection goes, and this thread dials
    the worker's socket again until it answers, which it does once the
    sandbox runs again, restored (the worker closed its listener first).
    With network egress the relay (backends/container/relay.c) lets go of
    its connections to the worker's proxy first, for the same reason."""
    global conn
    relay_let_go()
    with send_lock:
        try:
            conn.close()
        except OSError:
            pass
        while True:
            time.sleep(0.02)
            try:
                conn = connect()
                return
            except OSError:
                pass


def relay_let_go():
    """The network relay's connections (host sockets) closed, if it runs:
    its control socket answers one byte once they are."""
    r = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        r.settimeout(4)
        r.connect("\0airlock-relay")
        r.recv(1)
    except OSError:
        pass  # no relay: no network egress
    finally:
        r.close()


def reseed():
    """The sandbox was restored from a snapshot (a resume, a fork's copy):
    the guest's kernel has fresh entropy already; the generators seeded
    from it at import draw the same as every other copy's until they are
    seeded again, from it. OpenSSL's (ssl.RAND_bytes, TLS keys, what a
    library linked to the system's libcrypto draws) keeps its state in
    this process, as every copy does, and reseeds itself after a fork (a
    new pid) only: with libcrypto loaded, its state gets fresh bytes too."""
    for name in ("random", "numpy.random"):
        mod = sys.modules.get(name)
        try:
            if mod is not None:
                mod.seed()
        except Exception:
            pass
    try:
        with open("/proc/self/maps") as f:
            crypto = "libcrypto" in f.read()
        if crypto:
            import ssl
            ssl.RAND_add(os.urandom(48), 48.0)
    except Exception:
        pass


def interrupt():
    current["interrupted"] = True
    if current["kind"] == "python":
        os.kill(os.getpid(), signal.SIGINT)
    elif current["proc"] is not None:
        try:
            os.killpg(current["proc"].pid, signal.SIGKILL)
        except OSError:
            pass


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_now():
    """The CPU time of this server (its threads: a python call) and of its
    children, those waited for and a running exec call's process group."""
    t = os.times()
    used = t.user + t.system + t.children_user + t.children_system
    proc = current["proc"]
    if proc is not None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == proc.pid:  # its process group
                used += (int(fields[11]) + int(fields[12])) / TICKS
    return used


def b64(data):
    return base64.b64encode(data).decode()


CHUNK_MAX = 16384  # a live output chunk's bytes at most (AL_OUT_CHUNK_MAX)


class Capture:
    """The call's stdout and stderr: fds 1 and 2 on memfds (so that
    subprocesses and C code are caught too), read back up to their caps; a
    watcher stops the call when one passes its cap and, for a call the
    worker asked live output of, sends what is new as chunk frames (up to
    the caps), the rest once the call ended, all before the answer."""

    def __init__(self, caps, live=None, cpu_ms=None):
        self.caps = caps
        self.live = live  # the call's id, when its output goes live
        self.cpu_s = cpu_ms / 1000.0 if cpu_ms else None  # the call's CPU time
        self.cpu_over = False
        self.sent = [0, 0]
        self.fds = [os.memfd_create("call-out"), os.memfd_create("call-err")]
        self.over = False
        self.done = threading.Event()

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = [os.dup(1), os.dup(2)]
        os.dup2(self.fds[0], 1)
        os.dup2(self.fds[1], 2)
        self.cpu_base = cpu_now()
        self.watcher = threading.Thread(target=self.watch, daemon=True)
        self.watcher.start()
        return self

    def watch(self):
        while not self.done.wait(0.05):
            for fd, cap in zip(self.fds, self.caps):
                if os.fstat(fd).st_size > cap and not self.over:
                    self.over = True
                    interrupt()
            if self.cpu_s and not self.cpu_over and \
                    cpu_now() - self.cpu_base >= self.cpu_s:
                self.cpu_over = True
                interrupt()
            self.send_new()

    def send_new(self):
        if not self.live:
            return
        for i, (fd, cap) in enumerate(zip(self.fds, self.caps)):
            end = min(os.fstat(fd).st_size, cap)
            while self.sent[i] < end:
                data = os.pread(fd, min(CHUNK_MAX, end - self.sent[i]), self.sent[i])
                if not data:
                    break
                self.sent[i] += len(data)
                send({"chunk": self.live, "t": ("out", "err")[i], "data_base64": b64(data)})

    def __exit__(self, *exc):
        self.done.set()
        self.watcher.join()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        for fd in self.saved:
            os.close(fd)
        self.send_new()
        return False

    def result(self, doc):
        for name, fd, cap in zip(("stdout", "stderr"), self.fds, self.caps):
            size = os.fstat(fd).st_size
            doc[name + "_base64"] = b64(os.pread(fd, min(size, cap), 0))
            doc[name + "_size"] = size
            os.close(fd)
        doc["output_limit"] = self.over
        doc["cpu_ms"] = int((cpu_now() - self.cpu_base) * 1000)
        doc["cpu_limit"] = self.cpu_over
        return doc


user = {"__name__": "__main__", "__builtins__": builtins}
outputs = []


def display(*objs):
    """A figure (or anything with _repr_png_) into the call's outputs;
    anything else printed, as a notebook would show it."""
    for o in objs:
        if hasattr(o, "savefig"):
            buf = io.BytesIO()
            o.savefig(buf, format="png")
            outputs.append({"mime": "image/png", "data_base64": b64(buf.getvalue())})
        elif hasattr(o, "_repr_png_"):
            outputs.append({"mime": "image/png", "data_base64": b64(o._repr_png_())})
        else:
            print(repr(o))


user["display"] = display


def figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            display(plt.figure(num))
        plt.close("all")
    except Exception as e:  # a broken figure must not break the call
        print("figure: %s" % e, file=sys.stderr)


ncalls = [0]


def run_python(code):
    """exec the code in the session's globals; the value of a last
    expression is printed, as a REPL does. Its tracebacks name it
    "<run_python #N>" (the session's Nth python call), with its lines
    (linecache): a function of an earlier call shows its own call's."""
    ncalls[0] += 1
    name = "<run_python #%d>" % ncalls[0]
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, "exec"), user)
    if last is not None:
        value = eval(compile(last, name, "eval"), user)
        if value is not None:
            print(repr(value))
    return 0


def call_python(req, cap):
    del outputs[:]
    doc = {"exit_code": 0}
    current["kind"] = "python"
    current["interrupted"] = False
    with cap:
        try:
            run_python(req["code"])
        except KeyboardInterrupt:
            doc["exit_code"] = 1
            doc["error"] = "KeyboardInterrupt: interrupted"
        except BaseException as e:  # SystemExit too: the session goes on
            doc["exit_code"] = e.code if isinstance(e, SystemExit) and \
                isinstance(e.code, int) else 1
            # the caller's frames only, from its code's first on: this
            # server's (and ast.parse's, for a SyntaxError) are not its business
            frames = list(traceback.extract_tb(e.__traceback__))
            while frames and not frames[0].filename.startswith("<run_python #"):
                frames.pop(0)
            frames = [f for f in frames if f.filename != SERVER_FILE]
            only = traceback.format_exception_only(type(e), e)
            sys.stderr.write("".join(["Traceback (most recent call last):\n"] +
                                     traceback.format_list(frames) + only) if frames
                             else "".join(only))
            doc["error"] = "".join(only).strip()
        finally:
            current["kind"] = None
        try:
            figures()
        except BaseException:
            pass
    doc["outputs"] = list(outputs)
    doc["interrupted"] = current["interrupted"]
    return cap.result(doc)


def call_exec(req, cap):
    argv = req.get("argv") or ["/bin/sh", "-c", req["code"]]
    doc = {}
    current["interrupted"] = False
    with cap:
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=cap.fds[0],
                                 stderr=cap.fds[1], cwd=WORK, start_new_session=True)
        except OSError as e:
            doc["exit_code"] = 127
            doc["error"] = "%s: %s" % (argv[0], e.strerror)
        else:
            current["proc"] = p
            rc = p.wait()
            current["proc"] = None
            doc["exit_code"] = rc if rc >= 0 else 128 - rc
            if rc < 0:
                doc["signal"] = -rc
    doc["interrupted"] = current["interrupted"]
    return cap.result(doc)


def beneath(path):
    full = os.path.realpath(os.path.join(WORK, path))
    if full != WORK and not full.startswith(WORK + os.sep):
        raise PermissionError("%s: outside the work directory" % path)
    return full


def call_file(req):
    op, path = req["op"], req.get("path") or ""
    try:
        full = beneath(path)
        if op == "put":
            os.makedirs(os.path.dirname(full), exist_ok=True)
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                         req.get("mode", 0o644))
            with os.fdopen(fd, "wb") as f:
                f.write(req["data"].encode() if "data" in req
                        else base64.b64decode(req.get("data_base64", "")))
            os.chmod(full, req.get("mode", 0o644))
            return {"exit_code": 0}
        if op == "get":
            with open(full, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(0)
                data = f.read(req["cap"])
            return {"exit_code": 0, "stdout_base64": b64(data), "stdout_size": size,
                    "output_limit": size > req["cap"]}
        lines = []
        for root, dirs, files in os.walk(full):
            dirs.sort()
            for name in sorted(files):
                p = os.path.join(root, name)
                lines.append("%d\t%s\n" % (os.lstat(p).st_size, os.path.relpath(p, WORK)))
            if len(lines) > 10000:
                break
        data = "".join(lines).encode()
        return {"exit_code": 0, "stdout_base64": b64(data), "stdout_size": len(data)}
    except OSError as e:
        return {"exit_code": 1, "error": "%s: %s" % (path or ".", e.strerror or e)}


def serve(restarted=None, via=None):
    """The calls, one at a time, on a connection of this process's own (via:
    the microVM supervisor's socket); restarted: why the interpreter before
    this one went (its hello says)."""
    global conn
    conn = via or connect()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=reader, daemon=True).start()
    hello = {"hello": 1, "python": sys.version.split()[0]}
    if restarted:
        hello["restarted"] = restarted
    send(hello)
    while True:
        req = requests.get()
        t0 = time.monotonic()
        op = req.get("op")
        try:
            live = req.get("id") if req.get("live") else None
            if op == "python":
                doc = call_python(req, Capture(req["caps"], live, req.get("cpu_ms")))
            elif op == "exec":
                doc = call_exec(req, Capture(req["caps"], live, req.get("cpu_ms")))
            else:
                doc = call_file(req)
        except Exception as e:
            doc = {"exit_code": 1, "error": "session server: %s" % e}
        doc["id"] = req.get("id")
        doc["wall_ms"] = int((time.monotonic() - t0) * 1000)
        send(doc)


def oom_kills():
    """The OOM killer's kills in this machine (a microVM's: the session's)."""
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def interpreter(why, via=None):
    """The child that serves: the first the OOM killer takes."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    try:
        serve(why, via)
    finally:
        os._exit(0)


def frames(buf):
    """The whole frames at buf's start, and the rest (a head over the bound
    passes on as it is: the worker ends the session at it)."""
    whole = 0
    while len(buf) - whole >= 4:
        n = struct.unpack(">I", buf[whole:whole + 4])[0]
        if n > FRAME_MAX:
            return buf, b""
        if len(buf) - whole - 4 < n:
            break
        whole += 4 + n
    return buf[:whole], buf[whole:]


def relay(pid, child, port, from_port):
    """A microVM's port (one stream, which outlives any interpreter) and the
    interpreter's socket: whole frames each way, until the interpreter's end
    closes (a frame it was writing when killed goes nowhere). What came from
    the port between interpreters waits in from_port."""
    import select
    to_port = b""
    while True:
        ready, _, _ = select.select([4, child], [], [])
        if 4 in ready:
            data = os.read(4, 1 << 16)
            if not data:
                os.kill(pid, signal.SIGKILL)
                os._exit(0)  # the worker went away: the session is over
            from_port += data
            whole, from_port = frames(from_port)
            if whole:
                try:
                    child.sendall(whole)
                except OSError:
                    pass
        if child in ready:
            try:
                data = child.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                return from_port
            whole, to_port = frames(to_port + data)
            if whole:
                port.sendall(whole)


def supervise():
    """Runs the interpreter as a child and, when the kernel kills it (the
    session's memory), starts another, which says hello as restarted: the
    call that ran ends memory_limit, the sandbox and its files stay, the
    interpreter's state is gone. In a microVM (its session port on fd 4, one
    stream) this process keeps the port and relays the child's frames; else
    each child connects anew (the worker keeps its listener for that)."""
    try:
        import stat
        port = Port(4) if stat.S_ISCHR(os.fstat(4).st_mode) else None
    except OSError:
        port = None
    why, waiting, kills = None, b"", oom_kills()
    for _ in range(1000):
        ours, theirs = socket.socketpair() if port else (None, None)
        pid = os.fork()
        if pid == 0:
            if port:
                ours.close()
                os.close(4)
            interpreter(why, theirs)
        if port:
            theirs.close()
            waiting = relay(pid, ours, port, waiting)
            ours.close()
        _, st = os.waitpid(pid, 0)
        if not (os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL):
            break  # it exited (os._exit, an error): so does the session
        now = oom_kills()
        why, kills = "memory" if now > kills else "killed", now
    return st


def main():
    st = supervise()
    if os.WIFSIGNALED(st):  # the same death for the sandbox (SIGXCPU: the CPU budget)
        signal.signal(os.WTERMSIG(st), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(st))
    os._exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))


main()
