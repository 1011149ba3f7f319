#!/bin/sh
# The shared secret on rdma_cm's TCP streams between hosts (issue 24,
# item 5; rdmacm/link_auth.c), across network namespaces: with the same
# SOFTVERBS_SECRET_FILE on both sides rping, rstream (rsockets),
# ib_send_bw -R and udaddy (SIDR) work; with a wrong secret, or none on one side, the
# connection is refused on both sides, each saying so in one line, and
# the client ends UNREACHABLE (-13, EACCES) within a deadline, never a
# hang.  Then cmtime's connection set-up time with and without the
# secret.
#
# usage: netns_cm_secret.sh BUILD_DIR
# Needs root and ip(8): otherwise it says why and exits 77 (ctest: skipped).
set -u
build=$1
run="$build/bin/softverbs-run"
tag="svs$$"
failed=0
log=$(mktemp -d)

# shellcheck source=tests/netns/setup.sh disable=SC2154
. "$(dirname "$0")/setup.sh"
command -v rping >/dev/null || skip "needs rping (rdmacm-utils)"

A=10.77.0.1
s1=$log/secret1
s2=$log/secret2
head -c 32 /dev/urandom >"$s1"
head -c 32 /dev/urandom >"$s2"
chmod 600 "$s1" "$s2"
S1="env SOFTVERBS_SECRET_FILE=$s1"
S2="env SOFTVERBS_SECRET_FILE=$s2"
LINE="softverbs rdmacm: CM peer .*: refused"

# the same secret on both sides: the programs work as without it
# shellcheck disable=SC2086
pair rping_secret 60 "ping data: rdma-ping-99: " a b \
	$S1 rping -s -a $A -p @P -C 100 -v -- \
	$S1 rping -c -a $A -p @P -C 100 -v
# shellcheck disable=SC2086
pair rstream_secret 60 "custom    64k     100     1       12m" a b \
	$S1 rstream -p @P -S 65536 -C 100 -T v -- \
	$S1 rstream -s $A -p @P -S 65536 -C 100 -T v
if command -v ib_send_bw >/dev/null; then
	# shellcheck disable=SC2086
	pair ib_send_bw_R_secret 90 "65536 " a b \
		$S1 ib_send_bw -R -d softverbs0 -n 1000 -p @P -- \
		$S1 ib_send_bw -R -d softverbs0 -n 1000 -p @P $A
else
	echo "skip ib_send_bw_R_secret: no perftest"
fi

# SIDR (udaddy's fixed port 7174) over the same handshake
# shellcheck disable=SC2086
timeout 60 ip netns exec "$tag-a" $run $S1 udaddy -C 10 >"$log/udaddy.s" 2>&1 &
spid=$!
listening a 7174
# shellcheck disable=SC2086
timeout 60 ip netns exec "$tag-b" $run $S1 udaddy -s $A -C 10 \
	>"$log/udaddy.c" 2>&1
rc=$?
wait $spid
src=$?
if [ $rc -ne 0 ] || [ $src -ne 0 ] ||
	! grep -q "data transfers complete" "$log/udaddy.c"; then
	echo "FAIL udaddy_secret: client rc $rc, server rc $src"
	sed 's/^/  client: /' "$log/udaddy.c" | tail -8
	sed 's/^/  server: /' "$log/udaddy.s" | tail -8
	failed=1
else
	echo "ok   udaddy_secret: SIDR with the secret, 10 each way"
fi

# refused NAME SERVER_ENV CLIENT_ENV: rping's client must end
# UNREACHABLE -13 within 10 s, and both sides say why in one line
refused() {
	name=$1 senv=$2 cenv=$3
	port=$((port + 1))
	# shellcheck disable=SC2086
	timeout 30 ip netns exec "$tag-a" $run $senv rping -s -a $A -p $port \
		-C 1 -v >"$log/$name.s" 2>&1 &
	spid=$!
	listening a $port
	t0=$(date +%s%N)
	# shellcheck disable=SC2086
	timeout 10 ip netns exec "$tag-b" $run $cenv rping -c -a $A -p $port \
		-C 1 -v >"$log/$name.c" 2>&1
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	t=0
	until grep -q "$LINE" "$log/$name.s" || [ $t -ge 100 ]; do
		t=$((t + 1))
		sleep 0.05 # the server's line: no event says it was written
	done
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	if [ $rc -eq 0 ] || [ $rc -eq 124 ] ||
		! grep -q "RDMA_CM_EVENT_UNREACHABLE, error -13" "$log/$name.c" ||
		! grep -q "$LINE" "$log/$name.c" ||
		! grep -q "$LINE" "$log/$name.s"; then
		echo "FAIL $name: client rc $rc after ${ms} ms"
		sed 's/^/  client: /' "$log/$name.c" | tail -6
		sed 's/^/  server: /' "$log/$name.s" | tail -6
		failed=1
	else
		echo "ok   $name: refused in ${ms} ms (client rc $rc)"
		echo "       client: $(grep "$LINE" "$log/$name.c")"
		echo "       server: $(grep "$LINE" "$log/$name.s")"
	fi
}
refused secret_wrong "$S1" "$S2"
refused secret_server_only "$S1" ""
refused secret_client_only "" "$S1"

# cmtime across namespaces, without and with the secret: total ms for
# 100 connections and us per connection (its "connect" line)
for mode in plain secret; do
	e=""
	[ $mode = secret ] && e=$S1
	port=$((port + 1))
	# shellcheck disable=SC2086
	ip netns exec "$tag-a" $run $e cmtime -p $port >"$log/cmtime.$mode.s" 2>&1 &
	spid=$!
	listening a $port
	# shellcheck disable=SC2086
	if timeout 60 ip netns exec "$tag-b" $run $e cmtime -s $A -p $port \
		-c 100 >"$log/cmtime.$mode" 2>&1; then
		echo "ok   cmtime_$mode: $(grep "^connect " "$log/cmtime.$mode")"
	else
		echo "FAIL cmtime_$mode"
		tail -5 "$log/cmtime.$mode" | sed 's/^/  /'
		failed=1
	fi
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
done

exit $failed
