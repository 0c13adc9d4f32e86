"""A test "internet" for the egress tests and benchmark: a network namespace
joined to the host by a veth pair (host GW, namespace SRV in 10.X.N.0/24)
and Python's http.server serving a directory on SRV:8000 inside it; with
tls=True the same directory over TLS on SRV:8443, with a certificate for
SRV made here by openssl (self.ca: the file a client trusts). Traffic only
to addresses inside the namespace this makes."""
import os
import signal
import socket
import subprocess
import time


def _sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


class TestInternet:
    def __init__(self, tag, second_octet, www, tls=False):
        pid = os.getpid()
        n = 20 + (pid + second_octet) % 200
        self.ns = "al%s%d" % (tag, pid)
        self.host_if, self.ns_if = "al%sh%d" % (tag, pid % 10000), "al%sn%d" % (tag, pid % 10000)
        self.net = "10.%d.%d" % (second_octet, n)
        self.gw, self.srv = self.net + ".1", self.net + ".2"
        self.www = www
        self.tls = tls
        self.ca = os.path.join(www, "ca.pem") if tls else None
        self.server = self.tls_server = None

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
        if self.tls:
            self.tls_server = self._start_tls()
        for port in (8000, 8443) if self.tls else (8000,):
            for _ in range(100):
                try:
                    socket.create_connection((self.srv, port), 1).close()
                    break
                except OSError:
                    time.sleep(0.1)
        return self

    def _start_tls(self):
        """A self-signed certificate naming SRV (its IP address as the
        subject alternative name), and an https server with it."""
        key = os.path.join(self.www, "..", os.path.basename(self.www) + ".key")
        _sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=" + self.srv, "-addext", "subjectAltName=IP:" + self.srv,
            "-keyout", key, "-out", self.ca)
        os.chmod(self.ca, 0o644)
        code = ("import http.server, ssl, functools, sys\n"
                "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[3])\n"
                "s = http.server.ThreadingHTTPServer((sys.argv[1], 8443), h)\n"
                "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[2])\n"
                "s.socket = ctx.wrap_socket(s.socket, server_side=True)\n"
                "s.serve_forever()\n")
        with open(key, "a") as f, open(self.ca) as c:
            f.write(c.read())
        self.key = key
        return subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "/usr/bin/python3", "-c", code, self.srv, key,
             self.www], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        for srv in (self.server, self.tls_server):
            if srv:
                srv.send_signal(signal.SIGTERM)
                srv.wait(10)
        if self.tls:
            subprocess.run(["rm", "-f", self.key])
        _sh("ip", "link", "del", self.host_if, check=False)
        _sh("ip", "netns", "del", self.ns, check=False)
        subprocess.run(["rm", "-rf", self.www])
