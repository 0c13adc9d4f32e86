#!/usr/bin/env bash
# The hostile suite: every hostile program against every backend available.
exec /usr/bin/python3 "$(dirname "$0")/hostile.py" "$@"
