#!/usr/bin/python3
"""A git server for the tests: git's own smart-HTTP server (git
http-backend, run as CGI) for the bare repositories under ROOT, on
ADDR:PORT, protocol v2 included (the Git-Protocol header passed on).
Beside it, /moved.git/... answers a redirect to /repo.git/..., the way a
renamed repository does, and /slow.git/... never answers.

usage: gitserver.py ROOT ADDR PORT [CERT]  (CERT: key and certificate in
one PEM file: https)"""
import http.server
import ssl
import subprocess
import sys
import time


class Git(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def _cgi(self):
        path, _, query = self.path.partition("?")
        if path.startswith("/moved.git/"):
            self.send_response(301)
            self.send_header("Location", "/repo.git/" + self.path[len("/moved.git/"):])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path.startswith("/slow.git/"):
            time.sleep(600)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        env = {"PATH": "/usr/bin:/bin", "GIT_PROJECT_ROOT": ROOT, "GIT_HTTP_EXPORT_ALL": "1",
               "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
               "CONTENT_TYPE": self.headers.get("Content-Type") or "",
               "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": self.client_address[0],
               "GIT_PROTOCOL": self.headers.get("Git-Protocol") or "",
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding") or ""}
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)

    do_GET = do_POST = _cgi

    def log_message(self, *a):
        pass


ROOT = sys.argv[1]
server = http.server.ThreadingHTTPServer((sys.argv[2], int(sys.argv[3])), Git)
if len(sys.argv) > 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[4])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
