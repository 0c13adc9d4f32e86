"""A throwaway Airlock installation for tests: a real redis-server on a unix
socket in a temporary directory, schedulers and workers, all started and
stopped by PID here. Nothing outside the temporary directory is touched
except cgroups under airlock/<worker-id> (removed by the workers)."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

from altest import BUILD, CLI

SCHED = os.path.join(BUILD, "airlock-scheduler")
WORKER = os.path.join(BUILD, "airlock-worker")
REDIS_SERVER = "/usr/bin/redis-server"
# The redis-server settings docs/scale.md recommends ("Redis settings"):
# every finished job has its own small stream (al:out:<id>, its `end`
# entry at least), and Redis gives a new stream's first node
# min(4096, stream-node-max-bytes) bytes; a job's record (al:job:<id>)
# holds the job itself, past 64 bytes, so a stock Redis keeps it as a hash
# table instead of one listpack. The benchmarks run Redis so (and say so);
# the test suites run a stock Redis, which Airlock must work on as well.
REDIS_TUNING = ["--stream-node-max-bytes", "512", "--hash-max-listpack-value", "4096"]


class Cluster:
    def __init__(self, policy=None, aof=False, start_redis=True, sockperm="700", prefix=(),
                 redis_args=(), cli_auth=()):
        self.sockperm = sockperm
        self.cli_auth = list(cli_auth)  # e.g. --user U --pass P: redis-cli's own ACL user
        self.redis_args = list(redis_args)  # e.g. --appendfsync always
        self.prefix = list(prefix)  # e.g. ip netns exec NS: where workers and schedulers run
        self.dir = tempfile.mkdtemp(prefix="airlock-it-", dir="/var/tmp")
        os.chmod(self.dir, 0o755)
        self.sock = os.path.join(self.dir, "redis.sock")
        self.url = "unix://" + self.sock
        self.aof = aof
        self.redis = None
        self.procs = {}
        self.workers = []
        self.policy = os.path.join(self.dir, "policy.yaml")
        with open(self.policy, "w") as f:
            f.write(policy or DEFAULT_POLICY)
        if start_redis:
            self.start_redis()

    # --- redis ---
    def start_redis(self, extra=(), wait=True):
        """extra: more redis-server arguments for this start; wait: until it
        answers PING (False: return at once, e.g. while it loads its data)."""
        args = [REDIS_SERVER, "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", self.sockperm,
                "--dir", self.dir, "--save", "", "--logfile", os.path.join(self.dir, "redis.log")]
        if self.aof:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        args += self.redis_args + list(extra)
        self.redis = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200 if wait else 0):
            if os.path.exists(self.sock) and self.rcli("PING").strip() == "PONG":
                return
            time.sleep(0.02)
        if wait:
            raise RuntimeError("redis-server did not start")

    def kill_redis(self):
        """kill -9: what AOF holds survives, nothing else."""
        if self.redis and self.redis.poll() is None:
            self.redis.kill()
            self.redis.wait()
        self.redis = None

    def stop_redis(self):
        if self.redis and self.redis.poll() is None:
            self.rcli("SHUTDOWN")  # AOF is flushed on a clean shutdown
            try:
                self.redis.wait(10)
            except subprocess.TimeoutExpired:
                self.redis.kill()
                self.redis.wait()
        self.redis = None

    def rcli(self, *args, raw=False, db=0, timeout=30):
        """redis-cli's output; raw: the reply's bytes exactly (redis-cli adds
        one newline; a value may itself end in 0x0a, so only that one goes)."""
        p = subprocess.run(["redis-cli", "-s", self.sock, *self.cli_auth, "--no-auth-warning",
                            "-n", str(db), *args], capture_output=True, timeout=timeout)
        if raw:
            return p.stdout[:-1] if p.stdout.endswith(b"\n") else p.stdout
        return p.stdout.decode(errors="replace")

    def info(self, section):
        """INFO section as a dict of its fields (text values)."""
        return dict(l.split(":", 1) for l in self.rcli("INFO", section).splitlines() if ":" in l)

    def redis_cpu_s(self):
        """The redis-server's CPU time so far (user and system), seconds."""
        i = self.info("cpu")
        return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])

    # --- airlock processes ---
    def _start(self, name, args, env=None):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        p = subprocess.Popen(self.prefix + args, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                             env=env)
        log.close()
        self.procs[name] = p
        return p

    def scheduler(self, name="sched1", listen="off", extra=()):
        return self._start(name, [SCHED, "--redis", self.url, "--policy", self.policy,
                                  "--listen", listen, "--id", name, *extra])

    def worker(self, name="w1", uid_base=64000, slots=2, tiers="trusted", extra=(), env=None):
        self.workers.append(name)
        return self._start(name, [WORKER, "--redis", self.url, "--policy", self.policy,
                                  "--worker-id", name, "--uid-base", str(uid_base),
                                  "--slots", str(slots), "--tiers", tiers,
                                  "--state-dir", os.path.join(self.dir, "state"),
                                  "--heartbeat-ms", "300", *extra], env=env)

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
            return f.read()

    def signal(self, name, sig):
        self.procs[name].send_signal(sig)

    def wait_exit(self, name, timeout=30):
        try:
            return self.procs[name].wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def wait_done(self, jid, timeout=30):
        """Wait as PROTOCOL.md's "Wait" says, with redis-cli (AWAIT's two
        reads in its order: an end entry written after the GET comes after
        the newest entry read before it), then XREAD after that entry, a
        second at a time. The result's raw bytes, or None after timeout
        seconds."""
        end = time.time() + float(timeout)
        while True:
            last = self.rcli("XREVRANGE", "al:out:" + jid, "+", "-", "COUNT", "1").split("\n")[0]
            raw = self.rcli("GET", "al:res:" + jid, raw=True)
            if raw or time.time() >= end:
                return raw or None
            self.rcli("XREAD", "COUNT", "1", "BLOCK", "1000", "STREAMS", "al:out:" + jid,
                      last.strip() or "0-0")

    def run_job(self, job, timeout=120):
        """Submit a job dict the way a client in any language would (XADD
        to the intake), wait for its result (wait_done), return it decoded."""
        import msgpack
        subprocess.run(["redis-cli", "-s", self.sock, "-x", "XADD", "al:intake", "*", "job"],
                       input=msgpack.packb(job, use_bin_type=True), capture_output=True)
        raw = self.wait_done(job["id"], timeout)
        return msgpack.unpackb(raw, raw=False) if raw else None

    def cli(self, *args, timeout=60, input=None):
        return subprocess.run([CLI, "--redis", self.url, *args], capture_output=True,
                              timeout=timeout, input=input)

    def wait_for(self, cond, timeout=20, step=0.05):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return True
            time.sleep(step)
        return False

    def close(self):
        for name, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL if name.startswith("sched") else signal.SIGTERM)
        for name, p in self.procs.items():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.redis and self.redis.poll() is None:
            self.redis.kill()
            self.redis.wait()
        # Workers killed with SIGKILL leave empty cgroups (their sandboxes
        # died with them); a restart with the same id would sweep them.
        for name in self.workers:
            for ctrl in ("memory", "pids", "cpu", "cpuacct", "unified", ""):
                d = os.path.join("/sys/fs/cgroup", ctrl, "airlock", name)
                for dirpath, _, _ in (os.walk(d, topdown=False) if os.path.isdir(d) else ()):
                    try:
                        os.rmdir(dirpath)
                    except OSError:
                        pass
        # A worker killed with SIGKILL leaves its job tmpfs mounts behind (a
        # restart with the same id would sweep them); unmount before removal.
        with open("/proc/self/mounts") as f:
            mounts = [line.split()[1] for line in f]
        for m in sorted((m for m in mounts if m.startswith(self.dir + "/")), reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


DEFAULT_POLICY = """\
result_ttl_s: 3600
lease_ms: 1500
tiers:
  trusted:
    backend: process
    max_attempts: 3
    backoff_ms: 100
    defaults: {wall_ms: 10000, memory_bytes: 134217728}
  internal:
    backend: process
    max_attempts: 2
  bench:
    backend: noop
tenants:
  default: {}
"""
