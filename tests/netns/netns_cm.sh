#!/bin/sh
# rdma_cm between hosts (issue 12, acceptance 3): Debian's unmodified
# rdmacm-utils (rsockets' rstream and riostream too) and perftest -R
# across network namespaces, connected by IP
# address through softverbs' librdmacm (its TCP rendezvous, rdmacm/link.c)
# and carrying data over the verbs' TCP transport.  Then what must fail
# fails cleanly and fast: UD (udaddy) across hosts, a port nobody listens
# on, an address nobody has; and a peer killed after ESTABLISHED gives the
# survivor DISCONNECTED.
#
# usage: netns_cm.sh BUILD_DIR
# Needs root and ip(8): otherwise it says why and exits 77 (ctest: skipped).
set -u
build=$1
run="$build/bin/softverbs-run"
tag="svc$$"
failed=0
log=$(mktemp -d)

# shellcheck source=tests/netns/setup.sh disable=SC2154
. "$(dirname "$0")/setup.sh"
command -v rping >/dev/null || skip "needs rping (rdmacm-utils)"

A=10.77.0.1
B=10.77.0.2

pair rping 60 "ping data: rdma-ping-999: " a b \
	rping -s -a $A -p @P -C 1000 -v -- \
	rping -c -a $A -p @P -C 1000 -v
pair ucmatose_16 60 "data transfers complete" a b \
	ucmatose -p @P -c 16 -C 10 -- \
	ucmatose -s $A -p @P -c 16 -C 10
pair rdma_server_client 60 "rdma_client: end 0" b a \
	rdma_server -p @P -- \
	rdma_client -s $B -p @P
# rsockets (rdmacm/rsocket*.c) across hosts: a verified stream and
# riowrite into the peer's riomap window, over the verbs' TCP transport
pair rstream_1m 60 "custom    1m      100     1       200m" a b \
	rstream -p @P -S 1048576 -C 100 -T v -- \
	rstream -s $A -p @P -S 1048576 -C 100 -T v
pair riostream_64k 60 "custom    64k     100     1       12m" b a \
	riostream -p @P -S 65536 -C 100 -T v -- \
	riostream -s $B -p @P -S 65536 -C 100 -T v
if command -v ib_send_lat >/dev/null; then
	SV="-d softverbs0"
	pair ib_send_lat_R 90 "^ 2 " a b \
		ib_send_lat -R $SV -n 1000 -p @P -- \
		ib_send_lat -R $SV -n 1000 -p @P $A
	pair ib_send_bw_R 90 "65536 " a b \
		ib_send_bw -R $SV -n 1000 -p @P -- \
		ib_send_bw -R $SV -n 1000 -p @P $A
	pair ib_write_lat_R 90 "^ 2 " a c \
		ib_write_lat -R $SV -n 1000 -p @P -- \
		ib_write_lat -R $SV -n 1000 -p @P $A
	pair ib_read_bw_R 90 "65536 " b c \
		ib_read_bw -R $SV -n 1000 -p @P -- \
		ib_read_bw -R $SV -n 1000 -p @P $B
else
	echo "skip perftest -R rows: no perftest"
fi

# ends NAME DEADLINE WANT NS command...: the command must end (any exit
# status but a timeout's) within DEADLINE s, saying WANT (stdout+stderr)
ends() {
	name=$1 dl=$2 want=$3 ns=$4
	shift 4
	t0=$(date +%s)
	timeout "$dl" ip netns exec "$tag-$ns" $run "$@" >"$log/$name" 2>&1
	rc=$?
	el=$(($(date +%s) - t0))
	if [ $rc -eq 124 ] || [ $rc -eq 137 ] || ! grep -q "$want" "$log/$name"; then
		echo "FAIL $name: exit $rc after ${el}s, wanted '$want'"
		sed 's/^/  /' "$log/$name" | tail -10
		failed=1
	else
		echo "ok   $name: exit $rc after ${el}s: $(grep "$want" "$log/$name" | head -1)"
	fi
}

# cmtime: the server serves until stopped; the client's connection set-up
# rate across namespaces (its "connect" line: total ms for 100, us / conn)
port=$((port + 1))
ip netns exec "$tag-a" $run cmtime -p $port >"$log/cmtime.s" 2>&1 &
spid=$!
listening a $port
ends cmtime_100 60 "^connect " b cmtime -s $A -p $port -c 100
grep -h "^step\|^connect " "$log/cmtime_100" | sed 's/^/       /'
kill $spid 2>/dev/null
wait $spid 2>/dev/null

# UD ids do not cross hosts (SIDR is not on the CM's TCP rendezvous yet):
# udaddy's resolve fails at once with ADDR_ERROR and our line on stderr
ends udaddy_across_hosts_fails_fast 10 "reach this host's processes only" \
	b udaddy -s $A -C 10
grep -q "RDMA_CM_EVENT_ADDR_ERROR" "$log/udaddy_across_hosts_fails_fast" || {
	echo "FAIL udaddy_across_hosts_fails_fast: no ADDR_ERROR"
	failed=1
}

# nobody listens on the port: REJECTED (status 8), at once
port=$((port + 1))
ends rping_nobody_listens 15 "RDMA_CM_EVENT_REJECTED, error 8" b \
	rping -c -a $A -p $port -C 1 -v
# an address nobody has on the subnet (no ARP answer): UNREACHABLE (or
# ADDR_ERROR) within the CM's 2 s, never a hang
ends rping_nobody_has_address 15 "RDMA_CM_EVENT_UNREACHABLE\|RDMA_CM_EVENT_ADDR_ERROR" b \
	rping -c -a 10.77.0.9 -p $port -C 1 -v

# a peer killed after ESTABLISHED: the survivor's CM says DISCONNECTED
# (its TCP rendezvous connection closed) and rping ends
port=$((port + 1))
ip netns exec "$tag-a" $run rping -s -a $A -p $port -C 100000000 -v \
	>"$log/kill.s" 2>&1 &
spid=$!
listening a $port
ip netns exec "$tag-b" $run rping -c -a $A -p $port -C 100000000 -v \
	>"$log/kill.c" 2>&1 &
cpid=$!
t=0
until grep -q "ping data: rdma-ping-10:" "$log/kill.c" 2>/dev/null; do
	[ $t -ge 400 ] && break
	t=$((t + 1))
	sleep 0.05 # no event says another namespace's program runs
done
t0=$(date +%s)
kill -9 $cpid
wait $cpid 2>/dev/null
t=0
while kill -0 $spid 2>/dev/null && [ $t -lt 400 ]; do
	t=$((t + 1))
	sleep 0.05
done
el=$(($(date +%s) - t0))
# (rping ends at the first of its CM's DISCONNECTED and its QP's error
# completion; the CM's event itself is conf_cm's
# cm_peer_killed_after_established_disconnected, .tcp. run)
# (stdout's blocks and stderr's lines share the file: -o, not whole lines)
said=$(grep -o "DISCONNECT EVENT\|state 10\|completion failed[a-z ]*\|error [-0-9]*" \
	"$log/kill.s" | head -1)
if kill -0 $spid 2>/dev/null || [ -z "$said" ]; then
	echo "FAIL peer_killed_after_established: server still up, or ended saying neither DISCONNECT nor an error, after ${el}s"
	tail -c 600 "$log/kill.s" | sed 's/^/  server: /'
	kill -9 $spid 2>/dev/null
	failed=1
else
	echo "ok   peer_killed_after_established: the server ended after ${el}s: $said"
fi
wait $spid 2>/dev/null

exit $failed
