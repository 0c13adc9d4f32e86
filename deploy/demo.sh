#!/usr/bin/env bash
# usage: deploy/demo.sh   (as root; `make demo` builds it first)
# The demo: an embedded redis-server on a private unix socket in a temporary
# directory, one scheduler, one worker, the HTTP gateway, and a private
# libvirtd in a network namespace of its own (as the tests make it) for the
# service tier; a handful of example jobs through each tier whose backend
# works on this machine, a table of results, one job through the gateway
# with curl and another's live output, and a service VM answering on its own
# address; then it stops
# everything it started (by PID) and removes the directory.
set -euo pipefail
# --help: the comment above; no other argument is taken
case "${1:-}" in
-h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
"") ;;
*) echo "$(basename "$0"): no arguments (see $(basename "$0") --help)" >&2; exit 2 ;;
esac
BUILD=${BUILD:-build}
B=$(cd "$BUILD" && pwd)
if [ "$(id -u)" -ne 0 ]; then
	echo "demo: the sandboxes need root (namespaces, cgroups, uid switching); run: sudo make demo" >&2
	exit 1
fi
DIR=$(mktemp -d /tmp/airlock-demo.XXXXXX)
chmod 755 "$DIR"
SOCK="$DIR/redis.sock"
URL="unix://$SOCK"
PIDS=()
LVPID=""
cleanup() {
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	if [ -n "$LVPID" ]; then # last: the domains, the daemons, the namespace
		kill -TERM "$LVPID" 2>/dev/null || true
		for _ in $(seq 300); do kill -0 "$LVPID" 2>/dev/null || break; sleep 0.1; done
	fi
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$DIR"
}
trap cleanup EXIT

# What the demo's tiers use: the python image (the untrusted and container
# tiers' default) and the microVM guest, when missing or out of date (kept
# otherwise: seconds; the first time debootstraps python, ~2 min).
[ -f /var/lib/airlock/images/python.ext4 ] ||
	echo "demo: building the python image (first time: about 2 minutes; progress in $DIR/image.log)" >&2
if ! bash "$(dirname "$0")/images/build.sh" python >"$DIR/image.log" 2>&1 ||
	! bash "$(dirname "$0")/images/build.sh" --agent "$B/airlock-agent" microvm >>"$DIR/image.log" 2>&1; then
	echo "demo: an image could not be built; the untrusted tier will say why:" >&2
	tail -3 "$DIR/image.log" >&2
fi

# The service tier's libvirtd: its bridge, DHCP and VM addresses exist only
# in a network namespace made here (tests/lib/libvirtns.py, as the tests do);
# the service tier's worker runs in it, to reach the VMs (the other tiers'
# worker stays outside: `ip netns exec` gives its commands a /sys without the
# cgroup mounts their sandboxes need).
NETNS=() LVARGS=() NS="" URI=""
if [ -x /usr/sbin/libvirtd ] && [ -f /var/lib/airlock/images/microvm/data.qcow2 ]; then
	/usr/bin/python3 "$(dirname "$0")/../tests/lib/libvirtns.py" serve "$DIR/lv.env" \
		>"$DIR/libvirt.log" 2>&1 &
	LVPID=$!
	for _ in $(seq 600); do [ -f "$DIR/lv.env" ] && break; kill -0 "$LVPID" 2>/dev/null || break; sleep 0.1; done
	if [ -f "$DIR/lv.env" ]; then
		# shellcheck disable=SC1091
		. "$DIR/lv.env"
		NETNS=(ip netns exec "$NS")
		LVARGS=(--libvirt "$URI")
	else
		echo "demo: libvirtd did not start; the service tier will be unavailable (see $DIR/libvirt.log)" >&2
	fi
fi

cat >"$DIR/policy.yaml" <<'POLICY'
result_ttl_s: 3600
lease_ms: 15000
tiers:
  trusted:
    backend: process
    defaults: {wall_ms: 10000, memory_bytes: 268435456, pids: 64}
  internal:
    backend: container
    defaults: {wall_ms: 30000, memory_bytes: 268435456, pids: 64}
  untrusted:
    backend: microvm
    images: [python]
    image: python
    pool: 1
    defaults: {wall_ms: 30000, memory_bytes: 134217728, pids: 64}
    sessions: {max_per_tenant: 2, idle_s: 300, max_life_s: 900}
  service:
    backend: vm
    image: python
    ports: [8080]
    vm_lease_ms: 600000
    defaults: {wall_ms: 120000, memory_bytes: 134217728}
tenants:
  default: {max_queued: 100000}
POLICY

# --stream-node-max-bytes, --hash-max-listpack-value: docs/scale.md, "Redis settings"
redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --dir "$DIR" --save "" \
	--stream-node-max-bytes 512 --hash-max-listpack-value 4096 --logfile "$DIR/redis.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
"$B/airlock-scheduler" --redis "$URL" --policy "$DIR/policy.yaml" --listen off \
	"${LVARGS[@]}" 2>"$DIR/scheduler.log" &
PIDS+=($!)
"$B/airlock-worker" --redis "$URL" --policy "$DIR/policy.yaml" --worker-id demo \
	--tiers trusted,internal,untrusted --state-dir "$DIR/state" --slots 2 2>"$DIR/worker.log" &
PIDS+=($!)
if [ -n "$NS" ]; then
	"${NETNS[@]}" "$B/airlock-worker" --redis "$URL" --policy "$DIR/policy.yaml" \
		--worker-id demo-svc --tiers service --uid-base 61000 --state-dir "$DIR/state" \
		--slots 1 "${LVARGS[@]}" 2>"$DIR/worker-svc.log" &
	PIDS+=($!)
fi
# The front door: one tenant's API key, kept here only as its hash in the key file.
KEY=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
echo "demo $(printf '%s' "$KEY" | "$B/airlock-gateway" --hash-key)" >"$DIR/api-keys"
GWPORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$B/airlock-gateway" --redis "$URL" --keys "$DIR/api-keys" --listen "127.0.0.1:$GWPORT" \
	2>"$DIR/gateway.log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q event=redis_up "$DIR/worker.log" 2>/dev/null && break; sleep 0.05; done

# tier -> backend in the built-in policy
declare -A BACKEND=([trusted]=process [internal]=container [untrusted]=microvm [service]=vm)
JOBS=(
	"hello world|print('hello, world')|"
	"infinite loop|while True: pass|--timeout 1000"
	"memory hog|a = []\nwhile True: a.append(bytearray(1 << 20))|--memory 67108864"
	"network attempt|import socket\ntry:\n    socket.create_connection(('127.0.0.1', 6379), timeout=2); print('CONNECTED')\nexcept OSError as e:\n    print('blocked:', e)|"
	"fork bomb|import os\nwhile True:\n    try: os.fork()\n    except OSError: pass|--timeout 2000 --pids 32"
)
printf '\n%-10s %-9s %-16s %-14s %6s  %s\n' tier backend job status ms detail
printf '%s\n' "--------------------------------------------------------------------------------------------"
for tier in trusted internal untrusted; do
	be=${BACKEND[$tier]}
	if ! grep -q "event=backend name=$be ok=yes" "$DIR/worker.log"; then
		why=$(grep -o "event=backend name=$be ok=no why=\"[^\"]*\"" "$DIR/worker.log" | head -1 | sed "s/.*why=//" || true)
		printf '%-10s %-9s %-16s %-14s %6s  %s\n' "$tier" "$be" "-" "unavailable" "-" "${why:-not built}"
		continue
	fi
	for spec in "${JOBS[@]}"; do
		IFS='|' read -r name code flags <<<"$spec"
		# shellcheck disable=SC2086
		"$B/airlock" --redis "$URL" run --json --tier "$tier" $flags -c "$(printf '%b' "$code")" \
			>"$DIR/out.json" 2>/dev/null || true
		/usr/bin/python3 - "$tier" "$be" "$name" "$DIR/out.json" <<'PY'
import json, sys
tier, be, name, path = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as e:
    print("%-10s %-9s %-16s %-14s %6s  %s" % (tier, be, name, "client error", "-", e)); sys.exit()
detail = (r.get("error") or r.get("stdout") or r.get("stderr") or "").strip().splitlines()
print("%-10s %-9s %-16s %-14s %6s  %s" % (tier, be, name, r["status"], r["wall_ms"],
                                          (detail[0] if detail else "")[:60]))
PY
	done
done

# The service tier: a long-lived VM with its own address, answering on its port.
be=${BACKEND[service]}
for _ in $(seq 100); do grep -q "event=backend name=$be" "$DIR/worker-svc.log" 2>/dev/null && break; [ -n "$NS" ] || break; sleep 0.05; done
if ! grep -q "event=backend name=$be ok=yes" "$DIR/worker-svc.log" 2>/dev/null; then
	why=$(grep -o "event=backend name=$be ok=no why=\"[^\"]*\"" "$DIR/worker-svc.log" 2>/dev/null | head -1 | sed "s/.*why=//" || true)
	printf '%-10s %-9s %-16s %-14s %6s  %s\n' service "$be" "-" "unavailable" "-" "${why:-no libvirtd here}"
else
	cat >"$DIR/service.py" <<'PY'
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"hello from a service VM\n")
http.server.HTTPServer(("", 8080), H).serve_forever()
PY
	"$B/airlock" --redis "$URL" run --json --tier service "$DIR/service.py" \
		>"$DIR/svc.json" 2>/dev/null || true
	read -r status vmip vmname ms <<<"$(/usr/bin/python3 -c '
import json, sys
try:
    r = json.load(open(sys.argv[1])); i = r.get("info", {})
    print(r["status"], i.get("vm_ip", "-"), i.get("vm_name", "-"), r["wall_ms"])
except Exception:
    print("client-error - - -")' "$DIR/svc.json")"
	answer=$("${NETNS[@]}" curl -s -m 10 "http://$vmip:8080/" 2>/dev/null || true)
	printf '%-10s %-9s %-16s %-14s %6s  %s\n' service "$be" "web service" "$status" "$ms" \
		"VM $vmname at $vmip:8080 answers: ${answer:-nothing}"
	[ "$vmname" = "-" ] || "$B/airlock" --redis "$URL" vm stop "$vmname" >/dev/null 2>&1 || true
fi

# The same queue through the gateway, as a tenant's client would use it.
echo
echo "through the gateway (http://127.0.0.1:$GWPORT, tenant demo):"
echo "  curl -H 'Authorization: Bearer \$KEY' -d '{\"tier\":\"trusted\",\"runtime\":\"python\",\"code\":\"print(6*7)\"}' .../v1/run"
curl -s -m 60 -H "Authorization: Bearer $KEY" \
	-d '{"tier":"trusted","runtime":"python","code":"print(6*7)"}' \
	"http://127.0.0.1:$GWPORT/v1/run" | /usr/bin/python3 -c '
import json, sys
try:
    d = json.load(sys.stdin); r = d.get("result", {})
    print("  -> job %s: %s, exit %s, stdout %r" % (d.get("id"), r.get("status"), r.get("exit_code"), r.get("stdout")))
except Exception as e:
    print("  -> no answer from the gateway:", e)'

# Live output: a job's lines as it prints them, as Server-Sent Events.
echo
echo "live output of a job printing a line every 0.4 s (curl -N .../v1/jobs/ID/output):"
JID=$(curl -s -m 30 -H "Authorization: Bearer $KEY" \
	-d '{"tier":"trusted","runtime":"python","code":"import time\nfor i in range(4):\n    print(\"line\", i, flush=True)\n    time.sleep(0.4)\n"}' \
	"http://127.0.0.1:$GWPORT/v1/jobs" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin).get("id", ""))' || true)
if [ -n "$JID" ]; then
	curl -sN -m 60 -H "Authorization: Bearer $KEY" "http://127.0.0.1:$GWPORT/v1/jobs/$JID/output" |
		/usr/bin/python3 -c '
import json, sys, time
t0, ev = time.monotonic(), None
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.startswith("event: "):
        ev = line[7:]
    elif line.startswith("data: ") and ev:
        d = json.loads(line[6:])
        print("  %5.2f s  %-6s %s" % (time.monotonic() - t0, ev,
              d.get("data", d.get("status", "")).rstrip("\n")), flush=True)
        if ev == "end":
            break'
else
	echo "  -> no answer from the gateway"
fi

# What agents and courses come for, on the untrusted tier, with the Python
# client through the gateway: a session (an agent's run_python: two calls
# sharing a variable, a chart coming back) and a grading job (three tests
# of a submission, one answer wrong).
if grep -q "event=backend name=microvm ok=yes" "$DIR/worker.log"; then
	echo
	echo "an agent's session and a course's grading job on the untrusted tier (Python client):"
	AIRLOCK_GATEWAY="http://127.0.0.1:$GWPORT" AIRLOCK_TOKEN="$KEY" \
		PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)/client/python" /usr/bin/python3 - <<'PY' || true
import os, time
import airlock

cl = airlock.Client(gateway=os.environ["AIRLOCK_GATEWAY"], token=os.environ["AIRLOCK_TOKEN"],
                    tier="untrusted")
CHART = r"""
import struct, zlib
def png(w, h, rows):
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data)))
    raw = b"".join(b"\0" + bytes(r) for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
class Bars:  # a bar chart of sales, drawn by hand (the python image has no matplotlib)
    def _repr_png_(self):
        vals = list(sales.values())
        return png(30 * len(vals), 80, [[0 if x % 30 < 20 and 79 - y < 10 * vals[x // 30]
                                         else 255 for x in range(30 * len(vals))]
                                        for y in range(80)])
display(Bars())
print("best day:", max(sales, key=sales.get))
"""
try:
    t0 = time.monotonic()
    with cl.session(timeout=60) as s:
        opened = time.monotonic() - t0
        s.run_python("sales = {'mon': 3, 'tue': 7, 'wed': 5}")
        r = s.run_python(CHART)
    print("  session: opened in %.1f s (a microVM); call 1 set sales, call 2 used it: %s"
          % (opened, r.stdout.decode().strip()))
    print("           a chart came back: %s, %d bytes" % (r.outputs[0].mime, len(r.outputs[0].data))
          if r.outputs else "           no chart came back: %s" % (r.error or r.status))
    g = cl.grade([{"name": "small", "stdin": "1 2\n", "expect": "3\n"},
                  {"name": "big", "stdin": "40 2\n", "expect": "42\n"},
                  {"name": "negative", "stdin": "-1 -1\n", "expect": "-2\n"}],
                 language="python3", check=False,
                 files={"main.py": "a, b = map(int, input().split())\nprint(abs(a + b))\n"})
    print("  grading (language python3, main.py printing abs(a + b)): score %s of %s"
          % (g.score, g.max_score))
    for x in g.tests:
        print("    %-9s %-13s %s" % (x.name, x.verdict, x.detail or ""))
except airlock.AirlockError as e:
    print("  -> %s: %s" % (type(e).__name__, e))
PY
fi
echo
echo "demo: stopping redis-server, scheduler, worker, gateway and libvirtd; removing $DIR"
