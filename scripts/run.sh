#!/usr/bin/env bash
# run.sh: `make run`. Runs `echostore serve` on embedded defaults: a local
# data dir (./echostore-data), the file:// remote inside it, and Redis at
# $ECHOSTORE_REDIS, or at 127.0.0.1:6379, or else a private redis-server
# (AOF in the data dir) started here for the length of the run. A demo
# producer appends events to demo/events and enqueues jobs on demo; a demo
# consumer claims and acknowledges them. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=bin/echostore
data=${ECHOSTORE_DATA:-./echostore-data}
mkdir -p "$data"

say() { printf 'run: %s\n' "$*" >&2; }

bash scripts/deps.sh redis

pids=()   # the demo's processes, serve first
serve=''
cleanup() {
	for p in "${pids[@]}"; do [[ $p == "$serve" ]] || kill "$p" 2>/dev/null || true; done
	if [[ -n $serve ]] && kill "$serve" 2>/dev/null; then
		wait "$serve" 2>/dev/null || true # serve finishes its cycle and closes the data dir
	fi
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


listen=${ECHOSTORE_LISTEN:-127.0.0.1:7070}
base=http://$listen
remote=${ECHOSTORE_REMOTE:-file://$(cd "$data" && pwd)/remote}
command -v curl >/dev/null 2>&1 || { say "curl is missing (the demo producer and consumer use it): install it, e.g. apt-get install -y curl"; exit 1; }
# The demo's calls carry Content-Type: application/json (serve refuses a
# request that changes state without it) and the token: from the file
# $ECHOSTORE_TOKEN_FILE names, else $ECHOSTORE_TOKEN, else the admin token
# serve keeps in $data/serve.token when given none (read once serve is up).
# curl reads the header from a file descriptor, so the token never shows in ps.
token=${ECHOSTORE_TOKEN:-}
if [[ -n ${ECHOSTORE_TOKEN_FILE:-} ]]; then
	token=$(<"$ECHOSTORE_TOKEN_FILE")
fi

# The demo's configuration keeps 50 records of demo/events live, so the seam
# moves while you watch; ECHOSTORE_CONFIG=FILE runs your own instead.
config=${ECHOSTORE_CONFIG:-}
if [[ -z $config ]]; then
	config=$data/demo-serve.yaml
	# faults: true registers the fault route, for the dashboard's "inject
	# fault" control: a demo's, not a production setting.
	printf '%s\n' '# written by scripts/run.sh (make run)' 'beat: 2s' 'faults: true' \
		'queues:' '  - name: demo' '    streams:' '      - {name: events, keep: 50, archived: true, trim_after: remote}' >"$config"
fi
say "configuration: $config"
"$bin" serve --listen "$listen" --remote "$remote" --config "$config" &
serve=$!
pids+=("$serve")

for _ in $(seq 1 100); do
	curl -fsS "$base/healthz" >/dev/null 2>&1 && break
	kill -0 "$serve" 2>/dev/null || { wait "$serve" || true; say "echostore serve exited at start (its error is above)"; exit 1; }
	sleep 0.1
done
curl -fsS "$base/healthz" >/dev/null || { say "echostore serve does not answer at $base/healthz"; exit 1; }
if [[ -z $token && -z ${ECHOSTORE_CONFIG:-} && -f $data/serve.token ]]; then
	token=$(<"$data/serve.token")
fi

api() {
	if [[ -n $token ]]; then
		curl -fsS -H 'Content-Type: application/json' -H @<(printf 'Authorization: Bearer %s\n' "$token") "$@"
	else
		curl -fsS -H 'Content-Type: application/json' "$@"
	fi
}

producer() {
	local i=0
	while kill -0 "$serve" 2>/dev/null; do
		i=$((i + 1))
		api -X POST "$base/v1/streams/demo/events" -d "{\"fields\":{\"n\":\"$i\",\"kind\":\"demo\"}}" >/dev/null ||
			say "producer: append failed (see the serve log)"
		if ((i % 5 == 0)); then
			mode=async
			((i % 20 == 0)) && mode=sync
			# Every 15th job is due 20 s later: the console shows it delayed.
			body="{\"payload\":{\"n\":$i}}"
			((i % 15 == 0)) && body="{\"payload\":{\"n\":$i},\"run_at\":\"$(date -u -d '+20 seconds' +%Y-%m-%dT%H:%M:%SZ)\"}"
			api -X POST "$base/v1/queues/demo/jobs?mode=$mode" -d "$body" >/dev/null ||
				say "producer: enqueue failed (see the serve log)"
		fi
		sleep 0.2
	done
}

consumer() {
	local out entries
	while kill -0 "$serve" 2>/dev/null; do
		if out=$(api -X POST "$base/v1/queues/demo/claim?consumer=demo&count=10"); then
			# An empty claim matches nothing: grep's exit 1 must not end the
			# loop (set -e, pipefail).
			entries=$(printf '%s' "$out" | { grep -o '"entry":"[^"]*"' || true; } | cut -d'"' -f4 | sed 's/.*/"&"/' | paste -sd, -)
			if [[ -n $entries ]]; then
				sleep 2 # the work: the console shows the jobs in flight meanwhile
				api -X POST "$base/v1/queues/demo/ack" -d "{\"entries\":[$entries]}" >/dev/null ||
					say "consumer: ack failed (see the serve log)"
			fi
		else
			say "consumer: claim failed (see the serve log)"
		fi
		sleep 1
	done
}

producer &
pids+=("$!")
consumer &
pids+=("$!")

# The token goes in the address's fragment: the browser never sends it, and
# the dashboard removes it from the address bar once signed in.
dash=$base/
[[ -n $token ]] && dash="$base/#token=$token"
say "dashboard: $dash   (API $base/v1/…, metrics $base/metrics; Ctrl-C stops)"
say "CLI beside it goes through serve, e.g. ECHOSTORE_DATA=$data $bin stream read demo events --limit 3"
status=0
wait "$serve" || status=$?
# Ctrl-C reaches serve too; it shuts down gracefully and exits 0.
if ((status != 0)); then
	say "echostore serve exited with status $status (its log is above)"
	exit "$status"
fi
say "stopped"
