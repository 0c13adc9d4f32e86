"""Redis with a replica and three Sentinels, for tests: real redis-server
processes (Sentinel is `redis-server --sentinel`, what Debian's
redis-sentinel runs) on 127.0.0.1 ports of their own, in a temporary
directory, started and stopped here by PID. prefix: run each one inside
another network namespace, given per role (e.g. ip netns exec NS), and
listening on that namespace's address instead."""
import os
import shutil
import subprocess
import tempfile
import time

from gwclient import free_port  # noqa: F401 (the tests take it from here too)

REDIS_SERVER = "/usr/bin/redis-server"
MASTER = "mymaster"


class RedisHA:
    def __init__(self, down_after_ms=1000, failover_timeout_ms=3000, hosts=None, redis_args=()):
        """hosts: {"master": (prefix, addr), "replica": ..., "s0".."s2": ...}
        to run each in a namespace; default: all on 127.0.0.1. redis_args:
        more arguments for the master's and the replica's redis-server."""
        self.redis_args = list(redis_args)
        self.dir = tempfile.mkdtemp(prefix="airlock-ha-", dir="/var/tmp")
        os.chmod(self.dir, 0o755)
        self.hosts = hosts or {}
        self.procs = {}
        self.ports = {"master": free_port(), "replica": free_port()}
        for i in range(3):
            self.ports["s%d" % i] = free_port()
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self._start_redis("master", [])
        self._start_redis("replica", ["--replicaof", self.addr("master"),
                                      str(self.ports["master"])])
        for i in range(3):
            self._start_sentinel("s%d" % i)
        self.wait_ready()

    def addr(self, role):
        return self.hosts.get(role, ((), "127.0.0.1"))[1]

    def _prefix(self, role):
        return list(self.hosts.get(role, ((), None))[0])

    def _start(self, role, args):
        log = open(os.path.join(self.dir, role + ".log"), "ab")
        self.procs[role] = subprocess.Popen(self._prefix(role) + args, stdout=log, stderr=log,
                                            stdin=subprocess.DEVNULL)
        log.close()

    def _start_redis(self, role, extra):
        d = os.path.join(self.dir, role)
        os.makedirs(d, exist_ok=True)
        self._start(role, [REDIS_SERVER, "--port", str(self.ports[role]), "--bind",
                           self.addr(role), "--dir", d, "--save", "", "--appendonly", "no",
                           "--protected-mode", "no", "--repl-diskless-sync-delay", "0",
                           *self.redis_args, *extra])

    def _start_sentinel(self, role):
        conf = os.path.join(self.dir, role + ".conf")
        with open(conf, "w") as f:
            f.write("port %d\nbind %s\nprotected-mode no\ndir %s\n"
                    "sentinel monitor %s %s %d 2\n"
                    "sentinel down-after-milliseconds %s %d\n"
                    "sentinel failover-timeout %s %d\n"
                    "sentinel parallel-syncs %s 1\n"
                    % (self.ports[role], self.addr(role), self.dir, MASTER,
                       self.addr("master"), self.ports["master"], MASTER,
                       self.down_after_ms, MASTER, self.failover_timeout_ms, MASTER))
        self._start(role, [REDIS_SERVER, conf, "--sentinel"])

    def cli(self, role, *args, timeout=10):
        p = subprocess.run(self._prefix(role) + ["redis-cli", "-h", self.addr(role), "-p",
                                                 str(self.ports[role]), *args],
                           capture_output=True, timeout=timeout)
        return p.stdout.decode(errors="replace").strip()

    def sentinel_master(self, i=0):
        """(host, port) that sentinel i names now, or None."""
        out = self.cli("s%d" % i, "SENTINEL", "get-master-addr-by-name", MASTER).split()
        return (out[0], int(out[1])) if len(out) == 2 and out[1].isdigit() else None

    def wait_ready(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            info = self.cli("master", "INFO", "replication")
            seen = [self.cli("s%d" % i, "SENTINEL", "replicas", MASTER) for i in range(3)]
            if "connected_slaves:1" in info and "state=online" in info and all(str(self.ports["replica"]) in s
                                                    for s in seen):
                return
            time.sleep(0.2)
        raise RuntimeError("replica or sentinels not ready: %s" % self.dir)

    @property
    def url(self):
        return "redis+sentinel://%s/%s" % (
            ",".join("%s:%d" % (self.addr("s%d" % i), self.ports["s%d" % i]) for i in range(3)),
            MASTER)

    def kill(self, role):
        p = self.procs.get(role)
        if p and p.poll() is None:
            p.kill()
            p.wait()

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
