"""The gateway for tests: start it on a free port with a key file, and call
its HTTP API with Python's standard library (as any client would)."""
import http.client
import json
import os
import socket
import subprocess
import time

from altest import BUILD

GATEWAY = os.path.join(BUILD, "airlock-gateway")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def hashed(key):
    p = subprocess.run([GATEWAY, "--hash-key"], input=key.encode(), capture_output=True,
                       check=True)
    return p.stdout.decode().strip()


class Api:
    def __init__(self, port):
        self.port = port

    def call(self, method, path, body=None, key=None, ctype="application/json", raw=None,
             timeout=60):
        h = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        headers = {"Content-Type": ctype}
        if key:
            headers["Authorization"] = "Bearer " + key
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                             else None)
        h.request(method, path, body=data, headers=headers)
        r = h.getresponse()
        text = r.read()
        h.close()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, {"raw": text.decode(errors="replace")}


def start_gateway(c, port, keyfile, name="gw", url=None, extra=()):
    """Started, and ready: /healthz says Redis is up (its connection is made
    after it listens)."""
    c._start(name, [GATEWAY, "--redis", url or c.url, "--keys", keyfile,
                    "--listen", "127.0.0.1:%d" % port, "--max-body", "200000", *extra])
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            if Api(port).call("GET", "/healthz", timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)


def key_file(path, keys):
    """keys: tenant -> key; the file holds their hashes."""
    with open(path, "w") as f:
        f.write("# tenant  hash of its key\n")
        for tenant, key in keys.items():
            f.write("%s %s\n" % (tenant, hashed(key)))
    return path
