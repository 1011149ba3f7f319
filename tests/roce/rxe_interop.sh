#!/bin/sh
# shellcheck disable=SC2086 # $run is a command line (env ... softverbs-run): split on purpose
# Issue 26: the RoCEv2 transport against the kernel's Soft-RoCE (rxe) in
# a QEMU VM (tests/roce/vm/rxevm; SV_RXE_VM names another), both
# roles: Debian's ibv_rc_pingpong on softverbs
# (SOFTVERBS_TRANSPORT=roce, on the host side of the VM's tap) against
# the same program on rxe0 in the VM (-g 1: its IPv4-mapped GID), with
# its bytes checked (-c) at sizes of one packet, of pad and several
# packets, of two trains; softverbs as client, then as server.  Then
# perftest's eight programs, both roles (below).  rxe drops a packet
# whose ICRC is wrong,
# so each passing row shows it took ours.  Needs root and QEMU; skipped
# (77) without.
# The same for ibv_uc_pingpong and ibv_srq_pingpong (issue 26 item 2),
# and ibv_ud_pingpong on softverbs_roce0 (-g 1, as rxe0) at sizes up to
# the path MTU (SV_RXE_UD_SIZES: 1 1000 1024): UD over RoCEv2.
#   rxe_interop.sh BUILD_DIR [ITERS [SIZES]]   (SV_RXE_PROGS="rc uc srq ud")
build=$1
iters=${2:-20}
sizes=${3:-"1 1025 8191 20000"}
# the ibverbs examples to run: ibv_PROG_pingpong (SRQ: 16 RC QPs on the
# server's SRQ; UC: no ACKs)
progs=${SV_RXE_PROGS:-"rc uc srq ud"}
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (tap device, network namespace)"
# the VM: ours (tests/roce/vm/rxevm), or SV_RXE_VM (the same commands)
vm=${SV_RXE_VM:-$(dirname "$0")/vm/rxevm}
[ -x "$vm" ] || fail "no $vm"
command -v ibv_rc_pingpong >/dev/null || skip "no ibv_rc_pingpong"
# The VM has stopped answering in the middle of a run: not even ARP,
# its QEMU idle, its console silent (twice in CI at reorder_pp.s, once
# by hand at loss_pp.s on a VM that had run for 25 minutes; rxevm's
# guest is QEMU's TCG; rxevm now turns the NIC's event_idx off, the
# likely cause).  A row it died under says nothing of softverbs,
# so check() says so, with the wire and the console, and exits 75; a
# VM of our own is then started anew and the whole run made once more.
# A second death fails.  (SV_RXE_ATTEMPT: which run this is.)
if [ -z "${SV_RXE_ATTEMPT:-}" ]; then
	SV_RXE_ATTEMPT=1 sh "$0" "$@"
	rc=$?
	[ $rc = 75 ] || exit $rc
	echo "note: the VM stopped answering (above): all again on a new VM"
	SV_RXE_ATTEMPT=2 sh "$0" "$@"
	rc=$?
	[ $rc = 75 ] && rc=1
	exit $rc
fi
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
tmp=$(mktemp -d) || exit 1
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null
	[ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null
	[ "$started" = 1 ] && "$vm" stop >/dev/null 2>&1
	[ -n "$SV_KEEP" ] || rm -rf "$tmp"
}
trap cleanup EXIT
export SOFTVERBS_TRANSPORT=roce RXE_VM_QUIET=1
run="$build/bin/softverbs-run"
# Under the ASan build, Debian's programs need the runtime loaded first
# (SV_ASAN_RUNTIME, from CMake), as in tests/netns/setup.sh
if [ -n "${SV_ASAN_RUNTIME:-}" ]; then
	run="env LD_PRELOAD=$SV_ASAN_RUNTIME ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 $run"
fi
host=${RXE_VM_HOST_IP:-10.99.0.1}
guest=${RXE_VM_IP:-10.99.0.2}
# our GID index whose GID is the tap's address (::ffff:10.99.0.1)
# shellcheck disable=SC2046,SC2183 # the four octets, split on purpose
hx=$(printf '%02x%02x:%02x%02x' $(echo "$host" | tr . ' '))
g=$("$vm" exec $run ibv_devinfo -v |
	sed -n "s/.*GID\[ *\([0-9]*\)\]:.*ffff:$hx\$/\1/p" | head -1)
[ -n "$g" ] || fail "no softverbs GID for $host"
port=$((19000 + $$ % 1000))

# sv_server NAME ARGS...: softverbs serves in the background (spid)
sv_server() {
	name=$1
	shift
	"$vm" exec timeout 240 $run "$@" >"$tmp/$name.sv" 2>&1 &
	spid=$!
	t=0
	until "$vm" exec ss -Hltn "sport = :$port" | grep -q .; do
		t=$((t + 1))
		[ $t -lt 200 ] || fail "$name: softverbs never listened"
		sleep 0.05 # no event says a port in another namespace listens
	done
}

# rxe_server CMD: CMD (a server on TCP $port) in the VM in the background;
# returns once it listens.  rxe_server_rc NAME: waits for it to end, keeps
# its output as $tmp/NAME.rxe, and prints its exit status.
rxe_server() {
	rxe_bg=$("$vm" run --bg "$1")
	rxe_log=$(echo "$rxe_bg" | sed -n 's/.*log=\([^ ]*\).*/\1/p')
	rxe_rc=$(echo "$rxe_bg" | sed -n 's/.*rc=\([^ ]*\).*/\1/p')
	rxe_t=0
	# (255: the VM did not answer; waiting on would not help)
	until "$vm" run "netstat -ltn 2>/dev/null | grep -q :$port" ||
		[ $? = 255 ] || [ $rxe_t -ge 100 ]; do
		rxe_t=$((rxe_t + 1))
		sleep 0.2 # the VM's server to listen (TCG: seconds)
	done
}
rxe_server_rc() {
	rxe_t=0
	until "$vm" run "test -f $rxe_rc" || [ $? = 255 ] ||
		[ $rxe_t -ge 150 ]; do
		rxe_t=$((rxe_t + 1))
		sleep 0.2
	done
	"$vm" run "cat $rxe_log" >"$tmp/$1.rxe" 2>&1
	"$vm" run "cat $rxe_rc"
}

# While the pingpongs run, the tap's RoCEv2 is captured (tshark, if
# there is one) so that a failure shows its last packets: a row that
# fails now and then (a send's retries run out) says what was on the
# wire.  cap_start; cap_stop [show]: ends it, and with show prints the
# last packets and rxe's counters that are not 0.
cap_pid=
cap_start() {
	command -v tshark >/dev/null || return 0
	# headers only (-s: Ethernet, IP, UDP, BTH and the extended ones)
	"$vm" exec tshark -i "${RXE_VM_TAP:-svtap0}" -f "udp port 4791" \
		-s 128 -F pcap -w "$tmp/wire.pcap" >"$tmp/wire.log" 2>&1 &
	cap_pid=$!
	t=0
	until grep -q Capturing "$tmp/wire.log"; do
		t=$((t + 1))
		[ $t -lt 300 ] || { echo "FAIL tshark: $(cat "$tmp/wire.log")"; exit 1; }
		sleep 0.1 # polling its log, under the deadline above
	done
}
cap_stop() {
	[ -n "$cap_pid" ] || return 0
	kill -INT $(pgrep -P "$cap_pid") "$cap_pid" 2>/dev/null
	wait "$cap_pid"
	cap_pid=
	if [ "${1:-}" = show ]; then
		# the last 400, a line per run: one sender's packets of one
		# opcode to one QP at PSNs that count up by one (a train), or
		# the same ACK again
		echo "  the tap's last RoCEv2 packets, runs (softverbs is $host):"
		tshark -r "$tmp/wire.pcap" \
			-T fields -e frame.time_relative -e ip.src \
			-e infiniband.bth.opcode -e infiniband.bth.destqp \
			-e infiniband.bth.psn -e infiniband.bth.a \
			-e infiniband.aeth.syndrome 2>/dev/null | tail -400 |
			awk -F'\t' '
			function out() {
				if (n) printf "    %.6f-%.6f %s op %s qp %s psn %s-%s (%d) ackreq %d syn %s\n",
					t0, t1, src, op, qp, p0, p1, n, a, syn
			}
			{
				if (n && $2 == src && $3 == op && $4 == qp &&
				    (($3 != 17 && $5 == p1 + 1) ||
				     ($3 == 17 && $5 == p1 && $7 == syn))) {
					t1 = $1; p1 = $5; n++; a += ($6 == 1); next
				}
				out()
				t0 = t1 = $1; src = $2; op = $3; qp = $4
				p0 = p1 = $5; a = ($6 == 1); syn = $7; n = 1
			}
			END { out() }' | tail -30
		echo "  rxe0's counters that are not 0:"
		"$vm" run "cd /sys/class/infiniband/rxe0/ports/1/hw_counters &&
			grep -H . * | grep -v ':0\$'" 2>/dev/null | sed 's/^/    /'
	fi
	rm -f "$tmp/wire.pcap"
}

# vm_gone: returns if the VM answers; else prints its console's last
# lines and exits, 75 if the run may be made again (see above), else 1
vm_gone() {
	"$vm" run --timeout 10 true >/dev/null 2>&1 && return 0
	echo "  the VM does not answer; its console, the last lines:"
	"$vm" console | grep -v "speed is unknown" | tail -n 30 |
		sed 's/^/    /' # (rxe says that line at each port query)
	[ "$started" = 1 ] && [ "${SV_RXE_ATTEMPT:-}" = 1 ] && exit 75
	exit 1
}

check() { # NAME RC_RXE RC_SV WANT [RXE_WANT]: both exited 0, said so
	if [ "$2" != 0 ] || [ "$3" != 0 ] ||
		! grep -q "${5:-$4}" "$tmp/$1.rxe" ||
		! grep -q "$4" "$tmp/$1.sv"; then
		echo "FAIL $1: rxe rc $2, softverbs rc $3"
		# the wire first: a CI's excerpt of a long run shows the
		# first lines of a failure
		cap_stop show
		# what rxe's kernel said since the last row passed (a WARN
		# of rxe_completer: rxe saw us break the protocol)
		echo "  the VM's kernel since the last row passed:"
		"$vm" console 2>/dev/null | tail -n +$((con_seen + 1)) |
			grep -v "speed is unknown" | grep -A2 -i "warn\|rxe\|bug" |
			head -8 | sed 's/^/    /'
		# what went wrong is often before the last lines
		grep -i "error\|fail\|status\|exceeded" "$tmp/$1.rxe" |
			sed 's/^/  rxe said: /' | head -5
		grep -i "error\|fail\|status\|exceeded\|softverbs:" \
			"$tmp/$1.sv" | sed 's/^/  softverbs said: /' | head -5
		sed 's/^/  rxe: /' "$tmp/$1.rxe" | tail -8
		sed 's/^/  softverbs: /' "$tmp/$1.sv" | tail -8
		vm_gone
		exit 1
	fi
	echo "ok   $1: $(grep "$4" "$tmp/$1.sv" | tail -1)"
	con_seen=$("$vm" console 2>/dev/null | wc -l)
}
con_seen=$("$vm" console 2>/dev/null | wc -l)

cap_start
for pp in $progs; do
# UD: one packet a message (the program refuses more than the port's MTU);
# softverbs_roce0's GID 1 is the tap's address, as rxe0's
dev=softverbs0 gi=$g psizes=$sizes
[ "$pp" = ud ] && dev=softverbs_roce0 gi=1 psizes=${SV_RXE_UD_SIZES:-"1 1000 1024"}
for s in $psizes; do
	# softverbs the client: rxe's server in the background in the VM
	port=$((port + 1))
	rxe_server "ibv_${pp}_pingpong -d rxe0 -g 1 -p $port -n $iters -s $s -c"
	"$vm" exec timeout 240 $run ibv_${pp}_pingpong -d $dev -g "$gi" \
		-p $port -n "$iters" -s "$s" -c "$guest" >"$tmp/${pp}_cli$s.sv" 2>&1
	src=$?
	check "${pp}_cli$s" "$(rxe_server_rc "${pp}_cli$s")" $src "iters in"
	# softverbs the server
	port=$((port + 1))
	sv_server "${pp}_srv$s" ibv_${pp}_pingpong -d $dev -g "$gi" -p $port \
		-n "$iters" -s "$s" -c
	"$vm" run --timeout 240 "ibv_${pp}_pingpong -d rxe0 -g 1 -p $port \
		-n $iters -s $s -c $host" >"$tmp/${pp}_srv$s.rxe" 2>&1
	rrc=$?
	wait "$spid"
	src=$?
	spid=
	check "${pp}_srv$s" $rrc $src "iters in"
done
done
cap_stop

# perftest, both roles: each of the eight programs at 8 B, 4 KiB and 1 MiB
# (atomics: 8 B), softverbs the client against rxe's server, then rxe's
# client against softverbs' server; reads and atomics with rxe's 128
# outstanding, which perftest sets on both QPs.  Then 70 MiB of
# ib_send_bw each way: more than 65,536 packets, so that rxe's IPv4 ID
# counter, which the ICRC covers, passes through every value (a receiver
# that took IDs 0-63 for softverbs' dropped rxe's packets after it
# passed them).  perftest checks no payload: the bytes are checked by the
# pingpongs above.  (SV_RXE_PERF=0: not these; SV_RXE_PERF_SIZES;
# SV_RXE_PERF_PROGS)
# perftest's own clock fit before each report fails when the machine
# preempts it (tests/programs/programs.c): that run goes again.
clock_fit="Correlation coefficient r^2"
# perf_row NAME ROLE ARGS...: ROLE c: softverbs the client; s: the server
perf_row() {
	name=$1 role=$2
	shift 2
	want="^ *[0-9][0-9]* *[0-9][0-9]* " # a result line
	case $1 in
	*_lat) server_want="local address" ;; # (the client's numbers)
	*) server_want=$want ;;
	esac
	try=1
	while :; do
		port=$((port + 1))
		if [ "$role" = c ]; then
			rxe_server "$* -d rxe0 -x 1 -m 1024 -p $port"
			"$vm" exec timeout 240 $run "$@" -d softverbs0 \
				-x "$g" -m 1024 -p $port "$guest" \
				>"$tmp/$name.sv" 2>&1
			src=$?
			rrc=$(rxe_server_rc "$name")
		else
			sv_server "$name" "$@" -d softverbs0 -x "$g" -m 1024 \
				-p $port
			"$vm" run --timeout 240 "$* -d rxe0 -x 1 -m 1024 \
				-p $port $host" >"$tmp/$name.rxe" 2>&1
			rrc=$?
			wait "$spid"
			src=$?
			spid=
		fi
		if { [ "$rrc" = 0 ] && [ "$src" = 0 ]; } || [ $try -ge 3 ] ||
			! grep -qs "$clock_fit" "$tmp/$name.sv" "$tmp/$name.rxe"; then
			break
		fi
		echo "note $name: run $try: perftest could not time its report; again"
		try=$((try + 1))
	done
	# (check's WANT is softverbs', RXE_WANT rxe's)
	if [ "$role" = c ]; then
		check "$name" "$rrc" $src "$want" "$server_want"
	else
		check "$name" $rrc $src "$server_want" "$want"
	fi
}

perf_progs=${SV_RXE_PERF_PROGS:-"ib_send_lat ib_write_lat ib_read_lat \
ib_atomic_lat ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw"}
perf_sizes=${SV_RXE_PERF_SIZES:-"8 4096 1048576"}
[ "${SV_RXE_PERF:-1}" = 0 ] && perf_progs=""
for prog in $perf_progs; do
	for size in $perf_sizes; do
		case $prog in
		ib_atomic_*)
			[ "$size" = "${perf_sizes%% *}" ] || continue
			args="-n 100" size=8 # (an atomic is 8 bytes)
			;;
		*) args="-s $size -n $([ "$size" -ge 65536 ] && echo 10 || echo 100)" ;;
		esac
		case $prog in *_bw) args="$args -F" ;; esac
		for role in c s; do
			perf_row "${prog}_$size.$role" $role $prog $args
		done
	done
done
if [ -n "$perf_progs" ]; then
	for role in c s; do
		perf_row "ib_send_bw_70MiB.$role" $role ib_send_bw -s 1048576 \
			-n 70 -F
	done
fi

# rxe_hw NAME: rxe0's counter NAME (its port's hw_counters), 0 if none
rxe_hw() {
	v=$("$vm" run "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/$1" \
		2>/dev/null | tr -dc 0-9)
	echo "${v:-0}"
}

# pp_pair NAME SIZE ITERS [s]: ibv_rc_pingpong -c against rxe with $run,
# softverbs the client (NAME.c), then the server (NAME.s); with s, only
# the server
pp_pair() {
	if [ "${4:-}" != s ]; then
		port=$((port + 1))
		rxe_server "ibv_rc_pingpong -d rxe0 -g 1 -p $port -n $3 -s $2 -c"
		"$vm" exec timeout 240 $run ibv_rc_pingpong -d softverbs0 \
			-g "$g" -p $port -n "$3" -s "$2" -c "$guest" \
			>"$tmp/$1.c.sv" 2>&1
		src=$?
		check "$1.c" "$(rxe_server_rc "$1.c")" $src "iters in"
	fi
	# Ours the server: it ends once rxe acknowledges its last send,
	# but rxe's own last send is done only when our ACK of it counts.
	# On a wire that loses 2 % of what we send (wire_pp) that ACK can
	# be lost, or come while rxe resends that message and be passed
	# over (CI, 2026-12-07: our ACK of rxe's last PSN on the tap, then
	# rxe resending the message's tail, with no one left to answer,
	# till its timeout), as with any pair of ibv_rc_pingpong on a
	# lossy fabric.  Ours having checked every round trip, the row
	# runs once more, saying so; a second time fails.
	for try in 1 2; do
		port=$((port + 1))
		sv_server "$1.s" ibv_rc_pingpong -d softverbs0 -g "$g" \
			-p $port -n "$3" -s "$2" -c
		"$vm" run --timeout 240 "ibv_rc_pingpong -d rxe0 -g 1 \
			-p $port -n $3 -s $2 -c $host" >"$tmp/$1.s.rxe" 2>&1
		rrc=$?
		wait "$spid"
		src=$?
		spid=
		if [ $try = 1 ] && [ $src = 0 ] && [ $rrc != 0 ] &&
			grep -q "iters in" "$tmp/$1.s.sv"; then
			echo "note $1.s: rxe did not end (rc $rrc) after ours" \
				"checked all $3 round trips; once more"
			continue
		fi
		break
	done
	check "$1.s" $rrc $src "iters in"
}

# Loss with rxe as the peer (issue 26 item 4; SV_RXE_LOSS=0: not these).
# First on our side:
# SOFTVERBS_FAULTS on our side loses what rxe sends us, on arrival (ACKs
# are never lost): its sends and writes at our responder, so rxe goes
# back to the first lost PSN on our NAK-sequence or its own timer; its
# read responses at our requester, so we ask again.  Each both ways
# where both ways apply; the pingpong's bytes checked.  Then the budget:
# with every read response lost, ib_read_lat fails with
# RETRY_EXC_ERR, and only after retry_cnt + 1 ACK timeouts (perftest's
# timeout 14, 67 ms; retry_cnt 7: 0.54 s at least).
if [ "${SV_RXE_LOSS:-1}" != 0 ]; then
	cap_start
	base=$run
	run="env SOFTVERBS_FAULTS=drop=0.02,seed=11 $base"
	perf_row loss_send_bw.s s ib_send_bw -s 65536 -n 200 -F
	perf_row loss_write_bw.s s ib_write_bw -s 65536 -n 200 -F
	perf_row loss_read_bw.c c ib_read_bw -s 65536 -n 50 -F
	perf_row loss_read_bw.s s ib_read_bw -s 65536 -n 200 -F
	perf_row loss_read_lat.c c ib_read_lat -s 65536 -n 100
	pp_pair loss_pp 65536 100
	# reordered: what rxe sends us is taken out of order on arrival
	# (SOFTVERBS_FAULTS reorder: a datagram after the next one), its
	# sends at our responder, its read responses at our requester.
	# SV_RXE_WIRE=0: not these, nor the wire rows below.  (They were
	# opt-in while a stall of reorder_send_bw.s, seen with a responder
	# that NAKed discarded packets again, stood unexplained; with that
	# NAK narrowed, 15 full runs of 15 passed them on 2026-12-05, and
	# the wire rows 14, the other failing at wire_pp.c, below.)
	if [ "${SV_RXE_WIRE:-1}" != 0 ]; then
		run="env SOFTVERBS_FAULTS=reorder=0.02,seed=11 $base"
		perf_row reorder_send_bw.s s ib_send_bw -s 65536 -n 200 -F
		perf_row reorder_read_bw.c c ib_read_bw -s 65536 -n 50 -F
		pp_pair reorder_pp 65536 100
		# and what we send rxe reordered (reorder_out: a datagram of
		# a flush sent after the next one of it, each its own
		# message with the ICRC of its IPv4 ID): our sends at rxe's
		# responder, our read answers at its requester.  rxe's
		# out_of_seq_request counts the requests it took out of
		# sequence: none would mean nothing was reordered
		oos0=$(rxe_hw out_of_seq_request)
		run="env SOFTVERBS_FAULTS=reorder_out=0.02,seed=11 $base"
		perf_row reorder_out_send_bw.c c ib_send_bw -s 65536 -n 200 -F
		# our read answers, at 2 % as the rest (at 1 % from f8faeb6
		# to 27f7147: rxe's requester failed, status 5 with a WARN in
		# rxe_completer, once in CI and once in 12 runs here; the
		# cause was ours, a bare ACK at the PSN of a read whose answer
		# was still on its way: in.c sv_roce_answered_by_response)
		perf_row reorder_out_read_bw.s s ib_read_bw -s 65536 -n 50 -F
		pp_pair reorder_out_pp 65536 100
		oos=$(($(rxe_hw out_of_seq_request) - oos0))
		[ "$oos" -gt 0 ] ||
			fail "reorder_out rows: rxe took no request out of sequence"
		echo "ok   reorder_out: rxe took $oos requests out of sequence"
		run=$base
	fi
	# the budget
	run="env SOFTVERBS_FAULTS=drop=1 $base"
	port=$((port + 1))
	rxe_server "ib_read_lat -d rxe0 -x 1 -m 1024 -p $port -n 5"
	t0=$(date +%s%N)
	"$vm" exec timeout 120 $run ib_read_lat -d softverbs0 -x "$g" -m 1024 \
		-p $port -n 5 "$guest" >"$tmp/loss_budget.sv" 2>&1
	src=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	run=$base
	if [ $src = 0 ] || ! grep -qi "retry counter exceeded\|status 12\|syndrom 0x81\|error 12" \
		"$tmp/loss_budget.sv" || [ $ms -lt 537 ]; then
		echo "FAIL loss_budget: rc $src after $ms ms (want an error after 537 ms at least)"
		sed 's/^/  softverbs: /' "$tmp/loss_budget.sv" | tail -8
		exit 1
	fi
	echo "ok   loss_budget: ib_read_lat with every response lost failed after $ms ms: $(grep -i "retry\|status" "$tmp/loss_budget.sv" | head -1)"
	# Loss and duplicates on rxe's side: what we send rxe (sends,
	# writes, read and atomic requests, read answers, ACKs), 2 % lost
	# and 2 % sent twice on the way, by netfilter in the VM's namespace
	# (the statistic match, TEE): no qdisc, which this kernel lacks.
	# Without iptables, said and not run; SV_RXE_WIRE=0: not run.
	tap=${RXE_VM_TAP:-svtap0}
	if [ "${SV_RXE_WIRE:-1}" = 0 ]; then
		echo "note: loss on rxe's side (wire_*) not run: SV_RXE_WIRE=0"
	elif "$vm" exec iptables -A OUTPUT -o "$tap" -p udp --dport 4791 \
		-m statistic --mode random --probability 0.02 -j DROP \
		2>/dev/null &&
		"$vm" exec iptables -t mangle -A POSTROUTING -o "$tap" -p udp \
			--dport 4791 -m statistic --mode random \
			--probability 0.02 -j TEE --gateway "$guest" 2>/dev/null; then
		perf_row wire_send_bw.c c ib_send_bw -s 65536 -n 200 -F
		perf_row wire_write_bw.c c ib_write_bw -s 65536 -n 200 -F
		perf_row wire_read_bw.s s ib_read_bw -s 65536 -n 100 -F
		perf_row wire_read_lat.c c ib_read_lat -s 4096 -n 200
		perf_row wire_atomic_lat.c c ib_atomic_lat -n 300
		perf_row wire_atomic_bw.s s ib_atomic_bw -n 300 -F
		# softverbs the server only: ibv_rc_pingpong's server ends
		# when its last send is acknowledged, and the client's ACK of
		# it is its last packet.  When the client is ours, 2 % of
		# those are lost here, and no one is left to answer rxe's
		# resend (as with any pair of ibv_rc_pingpong on a lossy
		# fabric): in 1 run of 12, rxe's server had not ended 30 s
		# after our client had checked all 100 round trips
		pp_pair wire_pp 65536 100 s
		lost=$("$vm" exec iptables -L OUTPUT -v -x -n | awk '/DROP/ {print $1}')
		twice=$("$vm" exec iptables -t mangle -L POSTROUTING -v -x -n |
			awk '/TEE/ {print $1}')
		"$vm" exec iptables -F OUTPUT
		"$vm" exec iptables -t mangle -F POSTROUTING
		if [ "${lost:-0}" = 0 ] || [ "${twice:-0}" = 0 ]; then
			fail "wire rows: nothing lost ($lost) or sent twice ($twice)"
		fi
		echo "ok   wire: $lost of our packets lost on the way to rxe, $twice sent twice"
	else
		"$vm" exec iptables -F OUTPUT 2>/dev/null
		echo "note: no iptables (statistic, TEE) here: loss on rxe's side not run"
	fi
	cap_stop
fi
echo "PASS: ibv_{$progs}_pingpong both ways at $sizes bytes (UD: ${SV_RXE_UD_SIZES:-1 1000 1024})${perf_progs:+; perftest $perf_progs at $perf_sizes bytes, both roles, and 70 MiB of ib_send_bw each way}; loss rows, against rxe"
