#!/bin/sh
# softverbs-run --env and a bad value seen from a program (provider/lib/env.c):
# --help names --env; --env lists every row of the table as NAME=VALUE
# with a value set in the environment shown as set, and a bad one marked;
# rc_pingpong under SOFTVERBS_TCP_PORT=99999 fails on its usual "no
# device" path after exactly one line naming the variable.
# Usage: run_env.sh BUILD-DIR
set -eu
b=$1
run=$b/bin/softverbs-run
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "run_env: $*" >&2; exit 1; }

"$run" --help >"$out/help" || fail "--help failed"
grep -q -- '--env' "$out/help" || fail "--help does not mention --env"

names=$("$b/bin/softverbs-stat" --env --names)
[ "$(echo "$names" | wc -l)" -ge 17 ] || fail "the table has fewer than 17 rows"
env SOFTVERBS_RING_KB=64 SOFTVERBS_MCAST_DIR=/tmp/sv-x \
	SOFTVERBS_TCP_PORT=99999 SOFTVERBS_ARENA_GB=0 \
	"$run" --env >"$out/env" 2>"$out/env.err" || fail "--env failed"
[ ! -s "$out/env.err" ] || fail "--env wrote on stderr: $(cat "$out/env.err")"
for n in $names; do
	[ "$(grep -c "^$n=" "$out/env")" = 1 ] ||
		fail "--env does not list $n once"
done
grep -q '^SOFTVERBS_RING_KB=64	# set$' "$out/env" || fail "RING_KB=64 not shown"
grep -q '^SOFTVERBS_MCAST_DIR=/tmp/sv-x	# set$' "$out/env" ||
	fail "MCAST_DIR not shown"
grep -q '^SOFTVERBS_TCP_PORT=99999	# set, and bad: is not a port in 1..65535; softverbs0 will not open$' \
	"$out/env" || fail "the bad TCP_PORT is not marked"
grep -q "^SOFTVERBS_ARENA_GB=64	# set to '0', which is not in 1..16384 GiB: the default$" \
	"$out/env" || fail "the bad ARENA_GB is not marked"
grep -q '^SOFTVERBS_DEBUG=0	# default$' "$out/env" || fail "DEBUG's default not shown"
grep -q '^# bool: 0 or 1; default: 0; bad value: warn, use the default' \
	"$out/env" || fail "DEBUG's type, range, default and policy not shown"

# in an ASan build the runtime goes first for what runs under
# softverbs-run below, as tests/programs does
if [ -n "${SV_ASAN_RUNTIME:-}" ]; then
	export LD_PRELOAD="$SV_ASAN_RUNTIME"
	export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0
fi

# the library directory, canonical, however softverbs-run is named: an
# absolute path is taken as it is (no subshell), a relative one, one with
# "." or ".." or "//", or a PATH lookup are resolved as before
lib=$(cd "$b/lib" && pwd)
bin=$(cd "$b/bin" && pwd)
for how in "$bin/softverbs-run" "$bin/../bin/softverbs-run" \
	"$bin/./softverbs-run" "$bin//softverbs-run" ./softverbs-run \
	../bin/softverbs-run path; do
	if [ "$how" = path ]; then
		got=$(cd / && PATH="$bin:$PATH" softverbs-run sh -c 'echo "$LD_LIBRARY_PATH"')
	else
		got=$(cd "$bin" && "$how" sh -c 'echo "$LD_LIBRARY_PATH"')
	fi
	[ "${got%%:*}" = "$lib" ] ||
		fail "run as $how: LD_LIBRARY_PATH starts $got, not $lib"
done

# a program's usual error path: no device, one line from us
rc=0
SOFTVERBS_TCP_PORT=99999 "$run" "$b/bin/rc_pingpong" >"$out/pp" 2>"$out/pp.err" || rc=$?
[ $rc != 0 ] || fail "rc_pingpong succeeded with SOFTVERBS_TCP_PORT=99999"
[ "$(grep -c '^softverbs:' "$out/pp.err")" = 1 ] ||
	fail "not one softverbs line: $(cat "$out/pp.err")"
grep -q '^softverbs: SOFTVERBS_TCP_PORT=99999 is not a port in 1..65535; refusing to open softverbs0$' \
	"$out/pp.err" || fail "the line: $(cat "$out/pp.err")"
grep -q 'No RDMA devices found' "$out/pp.err" ||
	fail "rc_pingpong did not say it found no device: $(cat "$out/pp.err")"
echo "run_env: --env lists $(echo "$names" | wc -l) variables; a bad port refuses softverbs0"
