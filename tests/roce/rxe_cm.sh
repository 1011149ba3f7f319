#!/bin/sh
# Issue 26 item 3, before librdmacm speaks it: the IB CM codec
# (rdmacm/ib_mad.c) against the kernel's CM.  rping -s listens on rxe0
# in the VM (tests/roce/vm/rxevm; SV_RXE_VM names another, whose VM
# needs rping); cm_probe (tests/roce/cm_probe.c)
# on the host side of the tap plays an active side's MADs on QP1 over
# RoCEv2 from a plain UDP socket: REQ (with rdma_cm's cma_hdr), the
# kernel's REP parsed and answered with an RTU, then DREQ, and the
# kernel's DREP.  Passes when the probe completed and rping saw the
# connection end (its DISCONNECTED event, which rdma_cm gives only to an
# established connection; rping's stdout is lost when it aborts).
# Then Debian's rping on softverbs, client and server (rows
# rping_client, rping_server, below).  Needs root and QEMU; skipped (77) without,
# or when the VM has no rping.  Then udaddy both ways (SIDR), if the VM
# has it.
#   rxe_cm.sh BUILD_DIR
build=$1
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (tap device, network namespace)"
# the VM: ours (tests/roce/vm/rxevm), or SV_RXE_VM (the same commands)
vm=${SV_RXE_VM:-$(dirname "$0")/vm/rxevm}
[ -x "$vm" ] || fail "no $vm"
[ -x "$build/tests/cm_probe" ] || fail "no $build/tests/cm_probe"
started=0
if ! "$vm" status >/dev/null 2>&1; then
	"$vm" start
	case $? in
	0) ;;
	77) skip "no VM on this host (rxevm start: see above)" ;;
	*) fail "$vm start" ;;
	esac
	started=1
fi
cleanup() { [ "$started" = 1 ] && "$vm" stop >/dev/null 2>&1; }
trap cleanup EXIT
export RXE_VM_QUIET=1
"$vm" run 'command -v rping' >/dev/null 2>&1 ||
	skip "the VM has no rping"
host=${RXE_VM_HOST_IP:-10.99.0.1}
guest=${RXE_VM_IP:-10.99.0.2}
port=$((20000 + $$ % 1000))
# vm_until CMD N: until CMD succeeds in the VM, N tries 0.2 s apart (the
# VM's programs say nothing when they are ready: it is asked)
vm_until() {
	t=0
	until "$vm" run "$1" || [ $t -ge "$2" ]; do
		t=$((t + 1))
		sleep 0.2
	done
}
# rxe_listen CMD COMM: CMD (an rdma_cm server named COMM) in the VM in
# the background, its log in $log; returns once its cm_id listens on
# $guest:$port.  rdma_cm listens in the kernel: no socket to see, and
# rping says nothing until a connection, so the rdma tool is asked.
rxe_listen() {
	bg=$("$vm" run --bg "$1")
	log=$(echo "$bg" | sed -n 's/.*log=\([^ ]*\).*/\1/p')
	vm_until "rdma resource show cm_id |
		grep -q 'LISTEN.*comm $2 src-addr $guest:$port '" 100
}
# sv_listen OUT ARGS...: softverbs' rping ARGS in the background (spid),
# its output in OUT; returns once it listens on $port
sv_listen() {
	out_file=$1
	shift
	# shellcheck disable=SC2086 # $run is a command line
	"$vm" exec timeout 240 env SOFTVERBS_TRANSPORT=roce $run "$@" \
		>"$out_file" 2>&1 &
	spid=$!
	t=0
	until "$vm" exec ss -Hltn "sport = :$port" | grep -q .; do
		t=$((t + 1))
		[ $t -lt 200 ] || fail "$1 on softverbs never listened"
		sleep 0.05 # no event says a port in another namespace listens
	done
}
rxe_listen "rping -s -a $guest -p $port -v -C 1" rping
out=$("$vm" exec timeout 120 "$build/tests/cm_probe" "$host" "$guest" \
	"$port" 90 2>&1)
prc=$?
echo "$out" | sed 's/^/  probe: /'
vm_until "grep -q 'DISCONNECT EVENT' $log" 100
rlog=$("$vm" run "cat $log" 2>&1)
echo "$rlog" | sed 's/^/  rping: /' | head -20
[ $prc = 0 ] || fail "cm_probe exited $prc"
echo "$rlog" | grep -q "DISCONNECT EVENT" || fail "rping saw no DISCONNECT"
echo "ok   cm_probe: REQ REP RTU DREQ DREP with the kernel's CM"

# Debian's rping on our librdmacm (SOFTVERBS_TRANSPORT=roce: the IB CM's
# MADs, ib_link.c) against rping -s on rxe0: 100 iterations of RDMA READ
# (rxe reads us), WRITE and SEND, every one validated (-V).  It failed on
# data before the RoCE responder stopped acknowledging a read's PSN with
# a bare ACK (rxe completed the read on it, without its data).
run="$build/bin/softverbs-run"
if [ -n "${SV_ASAN_RUNTIME:-}" ]; then
	run="env LD_PRELOAD=$SV_ASAN_RUNTIME ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 $run"
fi
iters=${SV_RXE_CM_ITERS:-100}
port=$((port + 1))
rxe_listen "rping -s -a $guest -p $port -C $iters" rping
# shellcheck disable=SC2086 # $run is a command line
out=$("$vm" exec timeout 240 env SOFTVERBS_TRANSPORT=roce $run rping -c \
	-a "$guest" -p $port -v -V -C "$iters" 2>&1)
rc=$?
n=$(echo "$out" | grep -c "^ping data: rdma-ping-")
if [ $rc != 0 ] || [ "$n" != "$iters" ]; then
	echo "$out" | tail -8 | sed 's/^/  rping: /'
	fail "rping -c on softverbs: exit $rc, $n of $iters pings"
fi
echo "ok   rping_client: $n pings validated against rxe"

# softverbs the server: our rping -s takes rxe's REQ (its flow label's
# UDP source port for the data, as rxe sends from it); rping -c -V in the
# VM validates every ping (its exit status is lost: Debian's rping aborts
# at pthread_exit in the VM, which has no libgcc_s; it prints "data
# mismatch" on a bad one, and ours prints each ping it served)
port=$((port + 1))
sv_listen "/tmp/rxe_cm.$$" rping -s -a "$host" -p $port -v -C "$iters"
rout=$("$vm" run --timeout 240 "rping -c -a $host -p $port -V -C $iters" 2>&1)
wait "$spid"
src=$?
sout=$(cat "/tmp/rxe_cm.$$")
rm -f "/tmp/rxe_cm.$$"
n=$(echo "$sout" | grep -c "^server ping data: rdma-ping-")
if [ $src != 0 ] || [ "$n" != "$iters" ] ||
	echo "$rout" | grep -qi "mismatch\|fail"; then
	echo "$rout" | tail -5 | sed 's/^/  rxe rping: /'
	echo "$sout" | tail -5 | sed 's/^/  softverbs rping: /'
	fail "rping -s on softverbs: exit $src, $n of $iters pings"
fi
echo "ok   rping_server: $n pings served to rxe's validating client"

# The same at 65,000 bytes a ping (rping's largest is 65,535): each
# ping an RDMA READ and an RDMA WRITE of 64 packets, validated (-V) by
# the client; no -v (it prints every byte), so the exit status says
# (rping exits non-zero on "data mismatch"), rxe's too: its VM has the
# libgcc_s that pthread_exit wants.
big=${SV_RXE_CM_BIG:-20}
port=$((port + 1))
rxe_listen "rping -s -a $guest -p $port -S 65000 -C $big" rping
# shellcheck disable=SC2086 # $run is a command line
out=$("$vm" exec timeout 240 env SOFTVERBS_TRANSPORT=roce $run rping -c \
	-a "$guest" -p $port -S 65000 -V -C "$big" 2>&1)
rc=$?
if [ $rc != 0 ] || echo "$out" | grep -qi "mismatch"; then
	echo "$out" | tail -8 | sed 's/^/  rping: /'
	fail "rping -c -S 65000 on softverbs: exit $rc"
fi
echo "ok   rping_client_65000: $big pings of 65,000 bytes validated against rxe"
port=$((port + 1))
sv_listen "/tmp/rxe_cm.$$" rping -s -a "$host" -p $port -S 65000 -C "$big"
rout=$("$vm" run --timeout 240 "rping -c -a $host -p $port -S 65000 -V \
	-C $big" 2>&1)
rrc=$?
wait "$spid"
src=$?
sout=$(cat "/tmp/rxe_cm.$$")
rm -f "/tmp/rxe_cm.$$"
if [ $src != 0 ] || [ $rrc != 0 ] || echo "$rout" | grep -qi "mismatch"; then
	echo "$rout" | tail -5 | sed 's/^/  rxe rping: /'
	echo "$sout" | tail -5 | sed 's/^/  softverbs rping: /'
	fail "rping -s -S 65000 on softverbs: exit $src, rxe's client $rrc"
fi
echo "ok   rping_server_65000: $big pings of 65,000 bytes served to rxe's validating client"

# SIDR with the kernel's CM (rdmacm/ib_sidr.c): Debian's udaddy, 10
# messages each way over RoCE UD, softverbs the client then the server.
# Needs udaddy in the VM (ours has it; another VM's at /mnt/host/udaddy
# will do); else said and left.
ud=$("$vm" run 'command -v udaddy || ls /mnt/host/udaddy' 2>/dev/null |
	head -1)
if [ -z "$ud" ]; then
	echo "note: the VM has no udaddy: SIDR rows udaddy_client/server not run"
else
	"$vm" run --bg "$ud -b $guest -C 10 >/tmp/udaddy.s 2>&1" >/dev/null
	vm_until "rdma resource show cm_id | grep -q 'LISTEN.*comm udaddy'" 100
	# shellcheck disable=SC2086 # $run is a command line
	out=$("$vm" exec timeout 120 env SOFTVERBS_TRANSPORT=roce $run \
		udaddy -s "$guest" -C 10 2>&1)
	rc=$?
	sv=$("$vm" run "cat /tmp/udaddy.s")
	if [ $rc != 0 ] || ! echo "$out" | grep -q "data transfers complete" ||
		! echo "$sv" | grep -q "data transfers complete"; then
		echo "$out" | tail -5 | sed 's/^/  udaddy: /'
		echo "$sv" | tail -5 | sed 's/^/  rxe udaddy: /'
		fail "udaddy -s on softverbs against rxe: exit $rc"
	fi
	echo "ok   udaddy_client: SIDR to the kernel's CM, 10 messages each way"
	# shellcheck disable=SC2086 # $run is a command line
	"$vm" exec timeout 120 env SOFTVERBS_TRANSPORT=roce $run udaddy \
		-b "$host" -C 10 >"/tmp/rxe_ud.$$" 2>&1 &
	spid=$!
	t=0
	until "$vm" exec ss -Hltn "sport = :7174" | grep -q .; do
		t=$((t + 1))
		[ $t -lt 200 ] || fail "udaddy on softverbs never listened"
		sleep 0.05 # no event says a port in another namespace listens
	done
	rout=$("$vm" run --timeout 120 "$ud -s $host -C 10" 2>&1)
	wait "$spid"
	src=$?
	sout=$(cat "/tmp/rxe_ud.$$")
	rm -f "/tmp/rxe_ud.$$"
	if [ $src != 0 ] || ! echo "$sout" | grep -q "data transfers complete" ||
		! echo "$rout" | grep -q "data transfers complete"; then
		echo "$rout" | tail -5 | sed 's/^/  rxe udaddy: /'
		echo "$sout" | tail -5 | sed 's/^/  udaddy: /'
		fail "udaddy on softverbs, the server: exit $src"
	fi
	echo "ok   udaddy_server: rxe's SIDR REQ answered, 10 messages each way"
fi

# ucmatose (RC, its default 1 connection: 10 messages of 100 bytes each
# way) and ib_send_bw -R (perftest's rdma_cm set-up, 200 messages of
# 64 KiB; -m 1024, the path MTU of a 1500-byte link), softverbs the
# client then the server, against the same programs on rxe.
# rxe_cm_pair NAME WANT RXE_SERVER SV_CLIENT SV_SERVER RXE_CLIENT: each
# command line with @P for the port and @S for the server's address;
# rxe serves (its process is NAME) and we connect, then we serve and
# rxe connects; both sides must exit 0 and say WANT.  RXE_SERVER -: we
# only serve
rxe_cm_pair() {
	name=$1 want=$2
	[ "$3" = - ] || rxe_cm_client "$@"
	rxe_cm_server "$@"
}
rxe_cm_client() {
	name=$1 want=$2
	port=$((port + 1))
	rs=$(echo "$3" | sed "s/@P/$port/g; s/@S/$guest/g")
	sc=$(echo "$4" | sed "s/@P/$port/g; s/@S/$guest/g")
	bg=$("$vm" run --bg "$rs")
	rlog=$(echo "$bg" | sed -n 's/.*log=\([^ ]*\).*/\1/p')
	rrcf=$(echo "$bg" | sed -n 's/.*rc=\([^ ]*\).*/\1/p')
	vm_until "rdma resource show cm_id |
		grep -q 'LISTEN.*comm $name .*:$port '" 100
	# shellcheck disable=SC2086 # $run and $sc are command lines
	out=$("$vm" exec timeout 120 env SOFTVERBS_TRANSPORT=roce $run $sc 2>&1)
	rc=$?
	vm_until "test -f $rrcf" 150
	rout=$("$vm" run "cat $rlog" 2>&1)
	rrc=$("$vm" run "cat $rrcf" 2>&1)
	if [ $rc != 0 ] || [ "$rrc" != 0 ] || ! echo "$out" | grep -q -- "$want" ||
		! echo "$rout" | grep -q -- "$want"; then
		echo "$out" | tail -6 | sed "s/^/  $name: /"
		echo "$rout" | tail -6 | sed "s/^/  rxe $name: /"
		fail "$name on softverbs, the client: exit $rc, rxe's server $rrc"
	fi
	echo "ok   ${name}_client: $(echo "$out" | grep -- "$want" | tail -1)"
}
rxe_cm_server() {
	name=$1 want=$2
	port=$((port + 1))
	ss=$(echo "$5" | sed "s/@P/$port/g; s/@S/$host/g")
	rcl=$(echo "$6" | sed "s/@P/$port/g; s/@S/$host/g")
	# shellcheck disable=SC2086 # $ss is a command line
	sv_listen "/tmp/rxe_cm.$$" $ss
	rout=$("$vm" run --timeout 120 "$rcl" 2>&1)
	rrc=$?
	wait "$spid"
	src=$?
	sout=$(cat "/tmp/rxe_cm.$$")
	rm -f "/tmp/rxe_cm.$$"
	if [ $src != 0 ] || [ $rrc != 0 ] ||
		! echo "$sout" | grep -q -- "$want" ||
		! echo "$rout" | grep -q -- "$want"; then
		echo "$rout" | tail -6 | sed "s/^/  rxe $name: /"
		echo "$sout" | tail -6 | sed "s/^/  $name: /"
		fail "$name on softverbs, the server: exit $src, rxe's client $rrc"
	fi
	echo "ok   ${name}_server: $(echo "$sout" | grep -- "$want" | tail -1)"
}
if "$vm" run 'command -v ucmatose' >/dev/null 2>&1; then
	rxe_cm_pair ucmatose "return status 0" \
		"ucmatose -b @S -p @P" "ucmatose -s @S -p @P" \
		"ucmatose -b @S -p @P" "ucmatose -s @S -p @P"
else
	echo "note: the VM has no ucmatose: rows ucmatose_* not run"
fi
# ib_send_bw -R with softverbs the server only: perftest's client makes
# a second connection for the data right after the first (the
# parameters'), and its server listens again for it only once it has
# made its QPs; rxe's server, in a TCG VM, had not yet, and the kernel's
# CM refused our REQ (REJ, invalid service ID: no listener), which
# perftest takes as fatal (and then crashes in rdma_resolve_addr, given
# an id pointer that is not one).  rxe's client is the slow side.
if "$vm" run 'command -v ib_send_bw' >/dev/null 2>&1; then
	rxe_cm_pair ib_send_bw "^ 65536 " - - \
		"ib_send_bw -R -d softverbs0 -m 1024 -n 200 -p @P" \
		"ib_send_bw -R -d rxe0 -m 1024 -n 200 -p @P @S"
else
	echo "note: the VM has no ib_send_bw: rows ib_send_bw_* not run"
fi
echo "PASS: the IB CM with the kernel's (cm_probe; rping -V -C $iters, udaddy, ucmatose both ways; ib_send_bw -R, softverbs the server)"
