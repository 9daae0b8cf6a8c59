#!/usr/bin/env bash
# run.sh: `make run`. Runs echostore on embedded defaults: a local data dir
# (./echostore-data), the file:// remote inside it, and Redis at
# $ECHOSTORE_REDIS, or at 127.0.0.1:6379, or else a private redis-server
# started here for the length of the run.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=bin/echostore
data=${ECHOSTORE_DATA:-./echostore-data}
mkdir -p "$data"

say() { printf 'run: %s\n' "$*" >&2; }

bash scripts/deps.sh redis

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	if [[ -f $data/redis/redis.pid ]]; then
		redis-cli -p "$(cat "$data/redis/port")" shutdown nosave >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

ping() { redis-cli -u "$1" ping 2>/dev/null | grep -q PONG; }

if [[ -z ${ECHOSTORE_REDIS:-} ]]; then
	if ping redis://127.0.0.1:6379/0; then
		export ECHOSTORE_REDIS=redis://127.0.0.1:6379/0
		say "using the redis-server at 127.0.0.1:6379"
	else
		mkdir -p "$data/redis"
		port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 6399)
		echo "$port" >"$data/redis/port"
		redis-server --port "$port" --bind 127.0.0.1 --dir "$(cd "$data/redis" && pwd)" \
			--appendonly yes --appendfsync everysec --maxmemory-policy noeviction \
			--daemonize yes --pidfile "$(cd "$data/redis" && pwd)/redis.pid" --logfile redis.log
		for _ in $(seq 1 100); do ping "redis://127.0.0.1:$port/0" && break; sleep 0.1; done
		ping "redis://127.0.0.1:$port/0" || { say "the private redis-server did not start; see $data/redis/redis.log"; exit 1; }
		export ECHOSTORE_REDIS=redis://127.0.0.1:$port/0
		say "started a private redis-server at 127.0.0.1:$port (data in $data/redis)"
	fi
elif ! ping "$ECHOSTORE_REDIS"; then
	say "ECHOSTORE_REDIS=$ECHOSTORE_REDIS does not answer PING: start it or unset ECHOSTORE_REDIS"
	exit 1
fi
export ECHOSTORE_DATA=$data

has() { "$bin" "$@" --help >/dev/null 2>&1; }

if has serve; then
	exec "$bin" serve --demo
fi

# Until `echostore serve` exists, run a demo of what this build has.
say "this build has no 'serve' yet: running a demo of its commands"
"$bin" id mint -n 3
if has stream append; then
	for i in 1 2 3; do "$bin" stream append demo events n="$i" kind=demo; done
	"$bin" stream read demo events --live-only --limit 10
fi
say "done"
