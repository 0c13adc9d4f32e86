#!/usr/bin/env bash
# The demo: an embedded redis-server on a private unix socket in a temporary
# directory, one scheduler, one worker, a handful of example jobs through each
# tier whose backend works on this machine, a table of results; then it stops
# everything it started (by PID) and removes the directory.
set -euo pipefail
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
cleanup() {
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
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

redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --dir "$DIR" --save "" \
	--logfile "$DIR/redis.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
"$B/airlock-scheduler" --redis "$URL" --listen off 2>"$DIR/scheduler.log" &
PIDS+=($!)
"$B/airlock-worker" --redis "$URL" --worker-id demo --state-dir "$DIR/state" --slots 2 \
	2>"$DIR/worker.log" &
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
for tier in trusted internal untrusted service; do
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
echo
echo "demo: stopping redis-server, scheduler and worker; removing $DIR"
