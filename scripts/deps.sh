#!/usr/bin/env bash
# deps.sh: make sure the servers echostore's tests and demo need are present.
#   redis-server  from Debian's packages (apt-get, when run as root)
#   minio         the pinned build, installed with `go install` into
#                 ${XDG_CACHE_HOME:-$HOME/.cache}/echostore/bin (outside the repo)
#   chromium      Debian's headless browser, for the dashboard's browser test
#   node          Debian's nodejs and npm, for the RESP front's ioredis test
#                 (npm installs ioredis into the cache on the test's first run)
#   python3-redis Debian's redis-py, for the RESP front's redis-py tests
#   postgres      Debian's postgresql (initdb and postgres), for the peers
#                 benchmark's River rows and internal/testserver's launcher
#                 test; optional: when it cannot be installed this says so and
#                 goes on (the River rows are left out, the test skips)
# Usage: scripts/deps.sh [redis] [minio] [chromium] [node] [python3-redis] [postgres]   (redis and
# minio when no argument is given)
# Prints the exact command to run and exits non-zero when it cannot install
# a required one.
set -euo pipefail

MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
CACHE_BIN="${XDG_CACHE_HOME:-$HOME/.cache}/echostore/bin"

want=("$@")
[[ ${#want[@]} -eq 0 ]] && want=(redis minio)

say() { printf 'deps: %s\n' "$*" >&2; }

need_redis() {
	if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
		return 0
	fi
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		say "installing redis-server from Debian's packages"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq redis-server >/dev/null
		command -v redis-server >/dev/null 2>&1 && return 0
	fi
	say "redis-server is missing. Install it, then run this again:"
	say "    sudo apt-get update && sudo apt-get install -y redis-server"
	exit 1
}

need_minio() {
	if [[ -n ${ECHOSTORE_MINIO:-} && -x ${ECHOSTORE_MINIO} ]] || command -v minio >/dev/null 2>&1 ||
		[[ -x $CACHE_BIN/minio ]]; then
		return 0
	fi
	say "building the MinIO test server ($MINIO_VERSION) into $CACHE_BIN (about 2 minutes, once)"
	mkdir -p "$CACHE_BIN"
	if ! GOBIN="$CACHE_BIN" GOFLAGS=-mod=mod go install "github.com/minio/minio@$MINIO_VERSION"; then
		say "could not build MinIO. Run this, then try again:"
		say "    GOBIN=$CACHE_BIN go install github.com/minio/minio@$MINIO_VERSION"
		exit 1
	fi
}

need_chromium() {
	[[ -x /usr/bin/chromium ]] && return 0
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		say "installing chromium from Debian's packages (for the dashboard's browser test)"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq chromium >/dev/null
		[[ -x /usr/bin/chromium ]] && return 0
	fi
	say "chromium is missing. Install it, then run this again:"
	say "    sudo apt-get update && sudo apt-get install -y chromium"
	exit 1
}

# apt_need CHECK PACKAGES...: installs Debian's PACKAGES when the command
# CHECK is missing (as root), else says how and exits non-zero.
apt_need() {
	local check=$1
	shift
	eval "$check" >/dev/null 2>&1 && return 0
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		say "installing $* from Debian's packages"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq "$@" >/dev/null
		eval "$check" >/dev/null 2>&1 && return 0
	fi
	say "$* missing. Install, then run this again:"
	say "    sudo apt-get update && sudo apt-get install -y $*"
	exit 1
}

need_node() {
	local pkgs=()
	command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
	command -v npm >/dev/null 2>&1 || pkgs+=(npm)
	[[ ${#pkgs[@]} -eq 0 ]] && return 0
	apt_need 'command -v node && command -v npm' "${pkgs[@]}"
}

need_python3_redis() {
	apt_need '/usr/bin/python3 -c "import redis"' python3-redis # Debian's python3, where the package installs
}

have_postgres() {
	[[ -n ${ECHOSTORE_POSTGRES_BIN:-} && -x ${ECHOSTORE_POSTGRES_BIN}/initdb ]] && return 0
	command -v initdb >/dev/null 2>&1 && return 0
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

want_postgres() {
	have_postgres && return 0
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		say "installing postgresql from Debian's packages (for the River benchmark rows)"
		export DEBIAN_FRONTEND=noninteractive
		if apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; then
			have_postgres && return 0
		fi
	fi
	say "postgresql is missing (optional: River's benchmark rows are left out, its test skips)."
	say "    to have it: sudo apt-get update && sudo apt-get install -y postgresql"
	return 0
}

for w in "${want[@]}"; do
	case $w in
	redis) need_redis ;;
	minio) need_minio ;;
	chromium) need_chromium ;;
	node) need_node ;;
	python3-redis) need_python3_redis ;;
	postgres) want_postgres ;;
	*) say "unknown dependency $w (want redis, minio, chromium, node, python3-redis or postgres)"; exit 2 ;;
	esac
done
