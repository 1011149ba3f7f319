#!/bin/sh
# Issue 26, the codec's proof against the kernel: rc_responder (the RoCEv2
# codec over a UDP socket) answers Debian's ibv_rc_pingpong running on the
# kernel's rxe in a QEMU VM (tests/roce/vm/rxevm; SV_RXE_VM names
# another).  Passes when both ends finish their ITERS
# messages: rxe took every packet the codec built (it drops bad ICRCs)
# and the codec took rxe's.  Needs root and QEMU; skipped (77) without.
# Message sizes that take one packet, one with 3 bytes of pad, several.
# With tshark, the first size's packets are captured on the tap and
# every one, both ways, parsed by the codec with its ICRC checked against
# the IP header as captured (rxe's random IP IDs included).
#   rxe_rc_pingpong.sh BUILD_DIR [ITERS [SIZES]]
build=$1
iters=${2:-20}
sizes=${3:-"4096 1 1025 8191"}
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (tap device, network namespace)"
# the VM: ours (tests/roce/vm/rxevm), or SV_RXE_VM (the same commands)
vm=${SV_RXE_VM:-$(dirname "$0")/vm/rxevm}
[ -x "$vm" ] || fail "no $vm"
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
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null
	[ -n "$cpid" ] && kill "$cpid" 2>/dev/null
	[ "$started" = 1 ] && "$vm" stop >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

cap=
for size in $sizes; do
	if [ -z "$cap" ] && command -v tshark >/dev/null; then
		cap=$tmp/rxe.pcap
		"$vm" exec tshark -i "${RXE_VM_TAP:-svtap0}" -f "udp port 4791" \
			-F pcap -w "$cap" >"$tmp/cap.log" 2>&1 &
		cpid=$!
		i=0
		until grep -q Capturing "$tmp/cap.log"; do
			i=$((i + 1))
			[ $i -lt 300 ] || fail "tshark: $(cat "$tmp/cap.log")"
			sleep 0.1 # polling its log, under the deadline above
		done
	fi
	"$vm" exec "$build/tests/rc_responder" -n "$iters" >"$tmp/resp.log" 2>&1 &
	rpid=$!
	i=0
	until grep -q listening "$tmp/resp.log"; do
		i=$((i + 1))
		[ $i -lt 300 ] || fail "rc_responder never listened: $(cat "$tmp/resp.log")"
		kill -0 "$rpid" 2>/dev/null || fail "rc_responder: $(cat "$tmp/resp.log")"
		sleep 0.1 # polling its log, under the deadline above
	done
	RXE_VM_QUIET=1 "$vm" run --timeout 240 \
		"ibv_rc_pingpong -d rxe0 -g 1 -n $iters -s $size 10.99.0.1" \
		>"$tmp/pp.log" 2>&1
	pp=$?
	wait "$rpid"
	rc=$?
	rpid=
	echo "== $size bytes"
	cat "$tmp/pp.log" "$tmp/resp.log"
	[ "$pp" = 0 ] || fail "ibv_rc_pingpong -s $size on rxe exited $pp"
	[ "$rc" = 0 ] || fail "rc_responder exited $rc"
	grep -q "$iters iters in" "$tmp/pp.log" || fail "rc_pingpong did not finish"
	grep -q "$iters messages answered" "$tmp/resp.log" || fail "responder short"
	if [ -n "$cpid" ]; then
		sleep 1 # the last packets into the file; then the capture ends
		# tshark itself: the netns wrapper waits for it, signals aside
		kill -INT $(pgrep -P "$cpid") 2>/dev/null
		wait "$cpid"
		cpid=
		"$build/tests/roce_gen" parse "$cap" >"$tmp/verdicts" ||
			fail "roce_gen parse"
		n=$(wc -l <"$tmp/verdicts")
		bad=$(grep -vc '^ok ' "$tmp/verdicts")
		echo "captured $n RoCEv2 packets, both ways: $bad refused"
		[ "$n" -ge $((iters * 2)) ] || fail "only $n packets captured"
		[ "$bad" = 0 ] || fail "$(sort "$tmp/verdicts" | uniq -c)"
	fi
done
echo "PASS: $iters iterations of ibv_rc_pingpong (rxe) against the codec at $sizes bytes"
