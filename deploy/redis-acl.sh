#!/usr/bin/env bash
# usage: deploy/redis-acl.sh > FILE (the passwords from the environment)
# Make the Redis ACL file for Airlock's daemons from deploy/redis-users.acl.in:
#   AIRLOCK_GATEWAY_PASSWORD=... AIRLOCK_SCHEDULER_PASSWORD=... \
#   AIRLOCK_WORKER_PASSWORD=... AIRLOCK_OPERATOR_PASSWORD=... \
#   deploy/redis-acl.sh > /etc/redis/airlock.acl
# (the operator's: the airlock CLI's user over Redis, stats, dlq, vm)
# Only the passwords' SHA-256 go into the file.
set -euo pipefail
# --help: the comment above; no other argument is taken
case "${1:-}" in
-h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
"") ;;
*) echo "$(basename "$0"): no arguments (see $(basename "$0") --help)" >&2; exit 2 ;;
esac
here=$(dirname "$0")
for v in AIRLOCK_GATEWAY_PASSWORD AIRLOCK_SCHEDULER_PASSWORD AIRLOCK_WORKER_PASSWORD \
	AIRLOCK_OPERATOR_PASSWORD; do
	if [ -z "${!v:-}" ]; then
		echo "redis-acl.sh: set $v" >&2
		exit 2
	fi
done
h() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
sed -e "s/@GATEWAY@/$(h "$AIRLOCK_GATEWAY_PASSWORD")/" \
	-e "s/@SCHEDULER@/$(h "$AIRLOCK_SCHEDULER_PASSWORD")/" \
	-e "s/@WORKER@/$(h "$AIRLOCK_WORKER_PASSWORD")/" \
	-e "s/@OPERATOR@/$(h "$AIRLOCK_OPERATOR_PASSWORD")/" "$here/redis-users.acl.in" | grep -v '^#'
