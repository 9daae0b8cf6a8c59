#!/usr/bin/env bash
# fuzz.sh DURATION: run every go fuzz target in the module for DURATION each.
set -euo pipefail
fuzztime=${1:-10s}
n=0
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for t in $targets; do
		echo "fuzz: $pkg $t ($fuzztime)"
		go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" "$pkg"
		n=$((n + 1))
	done
done
echo "fuzz: $n targets ran, none failed"
