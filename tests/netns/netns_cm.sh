#!/bin/sh
# rdma_cm between hosts (issue 12, acceptance 3; IPv4 and IPv6): Debian's unmodified
# rdmacm-utils (XRC's rdma_xserver/rdma_xclient and rsockets' rstream and
# riostream too) and perftest -R
# across network namespaces, connected by IP
# address through softverbs' librdmacm (its TCP rendezvous, rdmacm/link.c)
# and carrying data over the verbs' TCP transport; UD (udaddy: SIDR) and
# multicast (mckey) too, their data over UDP.  Then what must fail fails
# cleanly and fast: a port nobody listens on, an address nobody has; and a
# peer killed after ESTABLISHED gives the survivor DISCONNECTED.
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
A6=fd00:5e::1

pair rping 60 "ping data: rdma-ping-999: " a b \
	rping -s -a $A -p @P -C 1000 -v -- \
	rping -c -a $A -p @P -C 1000 -v
pair ucmatose_16 60 "data transfers complete" a b \
	ucmatose -p @P -c 16 -C 10 -- \
	ucmatose -s $A -p @P -c 16 -C 10
# IPv6 (fd00:5e::x): the CM's TCP rendezvous over IPv6, the QPs' GIDs the
# IPv6 addresses (their data over TCP/IPv6).  ucmatose's server binds the
# IPv4 wildcard, which (not AFONLY, as the kernel's rdma_cm) takes IPv6
# requests too.
pair rping_ipv6 60 "ping data: rdma-ping-99: " a b \
	rping -s -a $A6 -p @P -C 100 -v -- \
	rping -c -a $A6 -p @P -C 100 -v
pair ucmatose_ipv6 60 "data transfers complete" a b \
	ucmatose -p @P -c 4 -C 10 -- \
	ucmatose -s $A6 -p @P -c 4 -C 10
pair rdma_server_client 60 "rdma_client: end 0" b a \
	rdma_server -p @P -- \
	rdma_client -s $B -p @P
# XRC through rdma_cm (-c x): the XRC_SEND id's QP reaches the server's
# XRC_RECV QP over TCP; the SRQ it names is of the same process and
# context (rdma_cm's one device), so nothing is forwarded between hosts
pair rdma_xserver_xclient 60 "rdma_xclient: end 0" a b \
	rdma_xserver -p @P -- \
	rdma_xclient -s $A -p @P
pair rdma_xserver_xclient_xrc 60 "rdma_xclient: end 0" a b \
	rdma_xserver -p @P -c x -- \
	rdma_xclient -s $A -p @P -c x
# rsockets (rdmacm/rsocket*.c) across hosts: a verified stream and
# riowrite into the peer's riomap window, over the verbs' TCP transport
pair rstream_1m 60 "custom    1m      100     1       200m" a b \
	rstream -p @P -S 1048576 -C 100 -T v -- \
	rstream -s $A -p @P -S 1048576 -C 100 -T v
pair rstream_ipv6 60 "custom    64k     100     1       12m" a c \
	rstream -f ipv6 -p @P -S 65536 -C 100 -T v -- \
	rstream -f ipv6 -s $A6 -p @P -S 65536 -C 100 -T v
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

# rcopy (rsockets): b copies a file to a's server, which serves until
# stopped; the copy must be identical to its source
port=$((port + 1))
ip netns exec "$tag-a" $run rcopy -p $port >"$log/rcopy.s" 2>&1 &
spid=$!
listening a $port
if timeout 60 ip netns exec "$tag-b" $run rcopy /usr/bin/rcopy \
	"$A:$log/rcopy.out" -p $port >"$log/rcopy.c" 2>&1 &&
	cmp -s /usr/bin/rcopy "$log/rcopy.out"; then
	echo "ok   rcopy_b_to_a: $(wc -c <"$log/rcopy.out") bytes, identical"
else
	echo "FAIL rcopy_b_to_a"
	sed 's/^/  client: /' "$log/rcopy.c" | tail -15
	sed 's/^/  server: /' "$log/rcopy.s" | tail -15
	failed=1
fi
kill $spid 2>/dev/null
wait $spid 2>/dev/null

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

# mckey across namespaces: receivers in b and c join 239.78.x.1 (RoCE's
# MGID ::ffff:239.78.x.1, an IPv4 group the verbs carry between hosts),
# then a sends 10; each receiver must take its 10 (mckey waits for them)
mgrp=239.78.$(($$ % 250)).1
for n in b c; do
	case $n in b) ma=10.77.0.2 ;; c) ma=10.77.0.3 ;; esac
	timeout 60 ip netns exec "$tag-$n" $run stdbuf -oL mckey -m $mgrp \
		-b "$ma" -C 10 >"$log/mckey.$n" 2>&1 &
	eval "mk_$n=\$!"
done
t=0
until grep -q "joined dgid" "$log/mckey.b" && grep -q "joined dgid" "$log/mckey.c"; do
	[ $t -ge 200 ] && break
	t=$((t + 1))
	sleep 0.05 # no event says another namespace's program joined
done
timeout 60 ip netns exec "$tag-a" $run mckey -m $mgrp -b $A -s -C 10 \
	>"$log/mckey.a" 2>&1
ms=$?
# shellcheck disable=SC2154
wait "$mk_b"
mb=$?
# shellcheck disable=SC2154
wait "$mk_c"
mc=$?
if [ $ms -ne 0 ] || [ $mb -ne 0 ] || [ $mc -ne 0 ] ||
	! grep -q "joined dgid: ::ffff:$mgrp" "$log/mckey.a" ||
	! grep -q "receiving data transfers" "$log/mckey.b" ||
	! grep -q "data transfers complete" "$log/mckey.b" ||
	! grep -q "data transfers complete" "$log/mckey.c"; then
	echo "FAIL mckey_a_to_b_c: sender rc $ms, receivers rc $mb/$mc"
	for n in a b c; do
		sed "s/^/  $n: /" "$log/mckey.$n" | tail -6
	done
	failed=1
else
	echo "ok   mckey_a_to_b_c: $(grep "joined dgid" "$log/mckey.a"); b and c received 10 each"
fi

# udaddy across namespaces (its fixed port 7174): SIDR over the CM's TCP
# rendezvous (the UD listener's TCP socket at its UDP port's number),
# then the datagrams over the verbs' UDP path; both sides must finish
# their 10 messages each way.
timeout 60 ip netns exec "$tag-a" $run udaddy -C 10 >"$log/udaddy.s" 2>&1 &
spid=$!
listening a 7174 # the UD listener's TCP socket: it takes SIDR REQs
timeout 60 ip netns exec "$tag-b" $run udaddy -s $A -C 10 \
	>"$log/udaddy.c" 2>&1
rc=$?
wait $spid
src=$?
if [ $rc -ne 0 ] || [ $src -ne 0 ] ||
	! grep -q "data transfers complete" "$log/udaddy.c" ||
	! grep -q "sending replies" "$log/udaddy.s" ||
	! grep -q "data transfers complete" "$log/udaddy.s"; then
	echo "FAIL udaddy: client rc $rc, server rc $src"
	sed 's/^/  client: /' "$log/udaddy.c" | tail -8
	sed 's/^/  server: /' "$log/udaddy.s" | tail -8
	failed=1
else
	echo "ok   udaddy: 10 each way after SIDR across namespaces"
fi
# the same over IPv6: SIDR over the rendezvous's IPv6 TCP, datagrams
# over UDP/IPv6 (the server's wildcard takes both families)
timeout 60 ip netns exec "$tag-a" $run udaddy -C 10 >"$log/udaddy6.s" 2>&1 &
spid=$!
listening a 7174
timeout 60 ip netns exec "$tag-b" $run udaddy -s $A6 -C 10 \
	>"$log/udaddy6.c" 2>&1
rc=$?
wait $spid
src=$?
if [ $rc -ne 0 ] || [ $src -ne 0 ] ||
	! grep -q "data transfers complete" "$log/udaddy6.c" ||
	! grep -q "data transfers complete" "$log/udaddy6.s"; then
	echo "FAIL udaddy_ipv6: client rc $rc, server rc $src"
	sed 's/^/  client: /' "$log/udaddy6.c" | tail -8
	sed 's/^/  server: /' "$log/udaddy6.s" | tail -8
	failed=1
else
	echo "ok   udaddy_ipv6: 10 each way after SIDR over IPv6"
fi
# SIDR toward an address nobody has: UNREACHABLE by the CM's connect
# deadline (2 s); toward a host where nobody listens on 7174: REJECTED 8
ends udaddy_nobody_has_address 15 "RDMA_CM_EVENT_UNREACHABLE" b \
	udaddy -s 10.77.0.9 -C 1
ends udaddy_nobody_listens 15 "RDMA_CM_EVENT_REJECTED, error: 8" b \
	udaddy -s $A -C 1

# nobody listens on the port: REJECTED (status 8), at once
port=$((port + 1))
ends rping_nobody_listens 15 "RDMA_CM_EVENT_REJECTED, error 8" b \
	rping -c -a $A -p $port -C 1 -v
# an address nobody has on the subnet (no ARP answer): UNREACHABLE (or
# ADDR_ERROR) within the CM's 2 s, never a hang
ends rping_nobody_has_address 15 "RDMA_CM_EVENT_UNREACHABLE\|RDMA_CM_EVENT_ADDR_ERROR" b \
	rping -c -a 10.77.0.9 -p $port -C 1 -v
# the same over IPv6 (no neighbour answers fd00:5e::9)
ends rping_nobody_has_address_ipv6 15 "RDMA_CM_EVENT_UNREACHABLE\|RDMA_CM_EVENT_ADDR_ERROR" b \
	rping -c -a fd00:5e::9 -p $port -C 1 -v
ends rping_nobody_listens_ipv6 15 "RDMA_CM_EVENT_REJECTED, error 8" b \
	rping -c -a $A6 -p $port -C 1 -v

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
