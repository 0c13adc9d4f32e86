#!/usr/bin/env bash
# Make the Redis ACL file for Airlock's daemons from deploy/redis-users.acl.in:
#   AIRLOCK_GATEWAY_PASSWORD=... AIRLOCK_SCHEDULER_PASSWORD=... \
#   AIRLOCK_WORKER_PASSWORD=... deploy/redis-acl.sh > /etc/redis/airlock.acl
# Only the passwords' SHA-256 go into the file.
set -euo pipefail
here=$(dirname "$0")
for v in AIRLOCK_GATEWAY_PASSWORD AIRLOCK_SCHEDULER_PASSWORD AIRLOCK_WORKER_PASSWORD; do
	if [ -z "${!v:-}" ]; then
		echo "redis-acl.sh: set $v" >&2
		exit 2
	fi
done
h() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
sed -e "s/@GATEWAY@/$(h "$AIRLOCK_GATEWAY_PASSWORD")/" \
	-e "s/@SCHEDULER@/$(h "$AIRLOCK_SCHEDULER_PASSWORD")/" \
	-e "s/@WORKER@/$(h "$AIRLOCK_WORKER_PASSWORD")/" "$here/redis-users.acl.in" | grep -v '^#'
