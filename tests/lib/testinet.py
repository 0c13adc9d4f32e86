"""A test "internet" for the egress tests and benchmark: a network namespace
joined to the host by a veth pair (host GW, namespace SRV in 10.X.N.0/24)
and Python's http.server serving a directory on SRV:8000 inside it. Traffic
only to addresses inside the namespace this makes."""
import os
import signal
import socket
import subprocess
import time


def _sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


class TestInternet:
    def __init__(self, tag, second_octet, www):
        pid = os.getpid()
        n = 20 + (pid + second_octet) % 200
        self.ns = "al%s%d" % (tag, pid)
        self.host_if, self.ns_if = "al%sh%d" % (tag, pid % 10000), "al%sn%d" % (tag, pid % 10000)
        self.net = "10.%d.%d" % (second_octet, n)
        self.gw, self.srv = self.net + ".1", self.net + ".2"
        self.www = www
        self.server = None

    def start(self):
        _sh("ip", "netns", "add", self.ns)
        _sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _sh("ip", "link", "set", self.ns_if, "netns", self.ns)
        _sh("ip", "addr", "add", self.gw + "/24", "dev", self.host_if)
        _sh("ip", "link", "set", self.host_if, "up")
        _sh("ip", "netns", "exec", self.ns, "ip", "addr", "add", self.srv + "/24", "dev",
            self.ns_if)
        _sh("ip", "netns", "exec", self.ns, "ip", "link", "set", self.ns_if, "up")
        _sh("ip", "netns", "exec", self.ns, "ip", "link", "set", "lo", "up")
        os.system("chmod -R a+rX " + self.www)
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "/usr/bin/python3", "-m", "http.server", "8000",
             "--bind", self.srv, "--directory", self.www],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection((self.srv, 8000), 1).close()
                return self
            except OSError:
                time.sleep(0.1)
        return self

    def stop(self):
        if self.server:
            self.server.send_signal(signal.SIGTERM)
            self.server.wait(10)
        _sh("ip", "link", "del", self.host_if, check=False)
        _sh("ip", "netns", "del", self.ns, check=False)
        subprocess.run(["rm", "-rf", self.www])
