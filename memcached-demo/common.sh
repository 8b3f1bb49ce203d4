# SPDX-License-Identifier: BSD-3-Clause
# common.sh -- shared helpers of the memcached-demo scripts (sourced, not run).
#
# Every server started through start_server is killed by the EXIT trap and by
# a watchdog after $MC_MAX_SECONDS, so no script can leave a server behind.

MC_HOST=127.0.0.1
MC_MAX_SECONDS=${MC_MAX_SECONDS:-600}
DEMO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$DEMO_DIR/.." && pwd)
# POOL_MEDIUM_DIR, PMEM_IS_PMEM_FORCE: PMT_POOL_MEDIUM's choice
. "$SRC_DIR/tools/pool-medium.sh"

_mc_pids=()        # servers we started
_mc_watchdogs=()   # their watchdogs
_mc_tmpdirs=()

die() { echo "$(basename "$0"): error: $*" >&2; exit 2; }
note() { echo "$(basename "$0"): $*" >&2; }

_mc_cleanup() {
	local p
	for p in "${_mc_pids[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	for p in "${_mc_watchdogs[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	for p in "${_mc_tmpdirs[@]}"; do
		[ -n "${KEEP_TMP:-}" ] || rm -rf -- "$p"
	done
}
trap _mc_cleanup EXIT
trap 'exit 130' INT TERM

# mc_tmpdir: sets TMP to a scratch directory removed at exit (kept when
# KEEP_TMP is set), on the pool medium (tools/pool-medium.sh: /dev/shm, or a
# disk with PMT_POOL_MEDIUM=disk).  Not for $(...): the subshell would lose
# the registration.
mc_tmpdir() {
	local base=$POOL_MEDIUM_DIR
	TMP=$(mktemp -d "$base/pmthreads-memcached.XXXXXX") || die "mktemp failed"
	_mc_tmpdirs+=("$TMP")
}

# A TCP port nobody listens on (tools/pmtkit/ports.py says where it is drawn from).
free_port() {
	PYTHONPATH=$SRC_DIR/tools python3 -B -m pmtkit.ports || die "no free port found"
}

# wait_port PORT SECONDS PID: until something accepts on PORT; fails early when
# PID (the server) died.
wait_port() {
	local port=$1 secs=$2 pid=$3 i
	for i in $(seq 1 $((secs * 20))); do
		if (exec 3<>"/dev/tcp/$MC_HOST/$port") 2>/dev/null; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# start_server LOGFILE PORT CMD...: runs CMD in the background (its pid in
# $MC_PID), with a watchdog, and waits until it listens on PORT.
start_server() {
	local log=$1 port=$2
	shift 2
	"$@" >>"$log" 2>&1 &
	MC_PID=$!
	_mc_pids+=("$MC_PID")
	# the watchdog takes its sleep along when it is told to stop
	( trap 'kill $s 2>/dev/null; exit 0' TERM
	  sleep "$MC_MAX_SECONDS" & s=$!
	  wait $s && kill -9 "$MC_PID" 2>/dev/null ) >/dev/null 2>&1 &
	_mc_watchdogs+=("$!")
	if ! wait_port "$port" 30 "$MC_PID"; then
		note "server did not come up on port $port; its log ($log):"
		tail -n 20 "$log" >&2
		return 1
	fi
}

# stop_server SIGNAL: signal the last started server and reap it; its
# watchdog goes too (a bench starts hundreds of servers).
stop_server() {
	local sig=${1:-TERM} i
	kill -"$sig" "$MC_PID" 2>/dev/null
	for i in $(seq 1 200); do
		kill -0 "$MC_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$MC_PID" 2>/dev/null
	wait "$MC_PID" 2>/dev/null
	if [ "${#_mc_watchdogs[@]}" -gt 0 ]; then
		kill "${_mc_watchdogs[-1]}" 2>/dev/null && wait "${_mc_watchdogs[-1]}" 2>/dev/null
	fi
	return 0
}

# memcached refuses to run as root without -u.
mc_user_args() {
	if [ "$(id -u)" = 0 ]; then echo "-u root"; fi
}

# build_client OUTDIR: compiles mc_client.c there, prints its path.
build_client() {
	local out=$1/mc_client
	if [ ! -x "$out" ] || [ "$DEMO_DIR/mc_client.c" -nt "$out" ]; then
		${CC:-cc} -O2 -Wall -pthread -o "$out" "$DEMO_DIR/mc_client.c" || die "cannot build mc_client"
	fi
	echo "$out"
}

# find_libpmthreads: path of libpmthreads.so ($LIBPMTHREADS, else the Meson
# build directory $BUILD_DIR or ../build, else pkg-config).
find_libpmthreads() {
	local c
	for c in "${LIBPMTHREADS:-}" "${BUILD_DIR:-$SRC_DIR/build}/preload/libpmthreads.so"; do
		if [ -n "$c" ] && [ -f "$c" ]; then
			echo "$c"
			return 0
		fi
	done
	c=$(pkg-config --variable=libdir pmthreads 2>/dev/null)
	if [ -n "$c" ] && [ -f "$c/libpmthreads.so" ]; then
		echo "$c/libpmthreads.so"
		return 0
	fi
	return 1
}

# find_memcached_pmthreads: $MEMCACHED_PMTHREADS, else where fetch-and-build.sh
# puts it by default.
find_memcached_pmthreads() {
	local c
	for c in "${MEMCACHED_PMTHREADS:-}" "${BUILD_DIR:-$SRC_DIR/build}/memcached-demo/memcached-pmthreads"; do
		if [ -n "$c" ] && [ -x "$c" ]; then
			echo "$c"
			return 0
		fi
	done
	return 1
}
