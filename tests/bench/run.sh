#!/usr/bin/env bash
# All benchmarks (not part of `make test`): `make bench`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export BUILD=${BUILD:-build}
# every benchmark's headline figures, printed as one table at the end (also
# when one fails: what ran is shown)
export BENCH_SUMMARY=${BENCH_SUMMARY:-$(mktemp /tmp/airlock-bench.XXXXXX)}
trap 'echo; /usr/bin/python3 tests/bench/summary.py "$BENCH_SUMMARY"' EXIT
/usr/bin/python3 tests/bench/process_latency.py "${PROCESS_ROUNDS:-100}"
echo
/usr/bin/python3 tests/bench/container_latency.py "${CONTAINER_ROUNDS:-60}"
echo
/usr/bin/python3 tests/bench/queue_throughput.py
echo
/usr/bin/python3 tests/bench/redis_settings.py "${REDIS_SETTINGS_ROUNDS:-5}"
echo
/usr/bin/python3 tests/bench/redis_count.py
echo
/usr/bin/python3 tests/bench/fleet.py "${FLEET_JOBS:-20000}"
echo
/usr/bin/python3 tests/bench/microvm_latency.py "${MICROVM_ROUNDS:-20}" "${MICROVM_POOL:-8}"
echo
/usr/bin/python3 tests/bench/image_latency.py "${IMAGE_ROUNDS:-10}" "${IMAGE_WORK_ROUNDS:-3}"
echo
/usr/bin/python3 tests/bench/vm_latency.py "${VM_ROUNDS:-5}" "${VM_AT_ONCE:-4}"
echo
/usr/bin/python3 tests/bench/egress_latency.py "${EGRESS_ROUNDS:-200}"
echo
/usr/bin/python3 tests/bench/gateway_latency.py "${GATEWAY_ROUNDS:-5}"
echo
/usr/bin/python3 tests/bench/gateway_attack.py "${GATEWAY_ATTACK_ROUNDS:-3}" 400
echo
/usr/bin/python3 tests/bench/live_output.py "${LIVE_ROUNDS:-5}" "${LIVE_JOBS:-60}"
echo
/usr/bin/python3 tests/bench/session_latency.py "${SESSION_ROUNDS:-40}"
echo
/usr/bin/python3 tests/bench/session_long.py "${SESSION_CALLS:-200}"
echo
/usr/bin/python3 tests/bench/snapshots.py "${SNAPSHOT_ROUNDS:-3}"
echo
/usr/bin/python3 tests/bench/agent_warm.py "${AGENT_WARM_ROUNDS:-3}"
echo
/usr/bin/python3 tests/bench/cpu_stability.py "${CPU_RUNS:-20}"
echo
ROUNDS=${FAULT_ROUNDS:-3} bash tests/bench/faults.sh
