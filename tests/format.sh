#!/usr/bin/env bash
# Every C source and header is formatted as the repo's .clang-format says
# (`make format` fixes it): one check, naming each file that is not.
set -u
cd "$(dirname "$0")/.."
# pinned: another major version formats some constructs otherwise, so a
# tree clean under one would fail under the next (deploy/install-deps.sh
# installs this one)
CF=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$CF" >/dev/null; then
	echo "not ok 1 - $CF is not installed (deploy/install-deps.sh installs it)"
	echo "1..1"
	exit 1
fi
n=0 bad=()
for f in $(git ls-files '*.c' '*.h'); do
	n=$((n + 1))
	"$CF" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -eq 0 ]; then
	echo "ok 1 - all $n C files are formatted as .clang-format says"
else
	echo "not ok 1 - ${#bad[@]} of $n C files are not formatted (run: make format)"
	printf '#   %s\n' "${bad[@]}"
fi
echo "1..1"
[ "${#bad[@]}" -eq 0 ]
