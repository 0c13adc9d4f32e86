"""Hosts for fleet tests: each "host" is a network namespace of its own with
one address, joined to the others by a bridge that lives in one more
namespace (the switch); nothing of it is on the machine's own network, and
traffic goes only to the addresses made here (10.77.N.0/24). A host can lose
its link (the switch's end of its cable goes down) and come back, or die
whole (every process in its namespace killed by PID: only processes this
test started run there)."""
import os
import signal
import subprocess
import time


def _sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


class Hosts:
    def __init__(self, names):
        pid = os.getpid()
        self.tag = "alh%d" % (pid % 100000)
        self.net = "10.77.%d" % (10 + pid % 200)
        self.switch = self.tag + "-sw"
        self.names = list(names)
        self.ns, self.ip, self.port = {}, {}, {}
        _sh("ip", "netns", "add", self.switch)
        self._in(self.switch, "ip", "link", "add", "br0", "type", "bridge")
        self._in(self.switch, "ip", "link", "set", "br0", "up")
        self._in(self.switch, "ip", "link", "set", "lo", "up")
        for i, name in enumerate(self.names):
            ns = "%s-%s" % (self.tag, name)
            sw_if, host_if = "s%d-%d" % (pid % 10000, i), "h%d-%d" % (pid % 10000, i)
            _sh("ip", "netns", "add", ns)
            _sh("ip", "link", "add", sw_if, "type", "veth", "peer", "name", host_if)
            _sh("ip", "link", "set", sw_if, "netns", self.switch)
            _sh("ip", "link", "set", host_if, "netns", ns)
            self._in(self.switch, "ip", "link", "set", sw_if, "master", "br0")
            self._in(self.switch, "ip", "link", "set", sw_if, "up")
            self.ip[name] = "%s.%d" % (self.net, 10 + i)
            self._in(ns, "ip", "addr", "add", self.ip[name] + "/24", "dev", host_if)
            self._in(ns, "ip", "link", "set", host_if, "up")
            self._in(ns, "ip", "link", "set", "lo", "up")
            self.ns[name] = ns
            self.port[name] = sw_if

    def _in(self, ns, *cmd):
        return _sh("ip", "netns", "exec", ns, *cmd)

    def prefix(self, name):
        """The command prefix that runs a program on host name: in its
        network namespace only (nsenter; `ip netns exec` would also mount a
        sysfs of its own, hiding the cgroup tree a worker needs)."""
        return ["nsenter", "--net=/run/netns/" + self.ns[name]]

    def link(self, name, up):
        """Plug host name's cable in (up) or pull it out."""
        self._in(self.switch, "ip", "link", "set", self.port[name], "up" if up else "down")

    def pids(self, name):
        p = _sh("ip", "netns", "pids", self.ns[name], check=False)
        return [int(x) for x in p.stdout.split()]

    def kill_host(self, name):
        """Every process on host name, at once (SIGKILL, by PID)."""
        for _ in range(20):
            pids = self.pids(name)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    def close(self):
        for name in self.names:
            self.kill_host(name)
            _sh("ip", "netns", "del", self.ns[name], check=False)
        _sh("ip", "netns", "del", self.switch, check=False)
