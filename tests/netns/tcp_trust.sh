#!/bin/sh
# Issue 24: who may take a QP's TCP link.  A live ibv_rc_pingpong -c
# (every buffer checked) between namespaces a and b; a raw attacker
# (tcp_attacker.py: the hello protocol by hand, no softverbs) calls a's
# door naming the victim QP:
#  - from a third address (namespace c), with the peer's QPN, with and
#    without claiming the link's cookie, and naming a QP that does not
#    exist: it is let in nowhere (no OK, no positions, epoch or STATE)
#    and reads the same bytes for the real QP and the missing one;
#  - from the peer's host (b) with the wrong QPN, and with the right one
#    but no proof of the link's cookie (the link is up);
#  - a proven hello and proof captured from a real reconnection (b's link
#    cut by an ACK timeout), replayed byte for byte from b: refused;
#  - another user (uid 65534) on the host of a pair that runs on one host
#    over loopback TCP (SOFTVERBS_TRANSPORT=tcp): refused;
# and each time the ping-pong (every buffer checked) goes on after the
# attacks, its link still moving data.  Then
# SOFTVERBS_SECRET_FILE: the same secret on both sides works; a wrong one
# or none on one side fails both programs (error exit, never a hang) with
# the line on stderr of each; a stranger's hello is refused at the door.
#
# usage: tcp_trust.sh BUILD_DIR
# Needs root and ip(8), else exits 77 (ctest: skipped).
set -u
build=$1
run="$build/bin/softverbs-run"
here=$(cd "$(dirname "$0")" && pwd)
# the system's python: another user (setpriv) may not run root's shims
py=$(command -v /usr/bin/python3 || command -v python3)
tag="svk$$"
failed=0
log=$(mktemp -d)
chmod 755 "$log"
# the attacker from a copy anyone may read: uid 65534 runs it too, and
# the tree may sit below a directory only root enters (a CI clone in
# mktemp -d's 700 one: "Permission denied", a row failed)
cp "$here/tcp_attacker.py" "$log/tcp_attacker.py"
chmod 644 "$log/tcp_attacker.py"
atk="$py $log/tcp_attacker.py"

# shellcheck source=tests/netns/setup.sh disable=SC2154
. "$here/setup.sh"
command -v ibv_rc_pingpong >/dev/null ||
	skip "needs ibv_rc_pingpong (ibverbs-utils)"
command -v setpriv >/dev/null || skip "needs setpriv (util-linux)"

A=10.77.0.1
DOOR=${SOFTVERBS_TCP_PORT:-4791} # the doors' port (SOFTVERBS_TCP_PORT)
SV="-d softverbs0"
# the victims run until the attacks are over (finish stops them)
N=1000000000

fail() {
	echo "FAIL $*"
	failed=1
}

# wait_for FILE PATTERN: until FILE has PATTERN (20 s at most)
wait_for() {
	t=0
	until grep -q "$2" "$1" 2>/dev/null; do
		[ $t -ge 400 ] && return 1
		t=$((t + 1))
		sleep 0.05 # another process's output: no event to wait on
	done
}

qpn_of() { # FILE: the local QPN the pingpong printed (hex, no 0x)
	sed -n 's/.*local address:.*QPN 0x\([0-9a-f]*\),.*/\1/p' "$1" | head -1
}

# start NAME SNS SGID CNS CGID: ibv_rc_pingpong -c -n N, server in SNS,
# client in CNS; sets vqpn (the server's QP: the victim) and pqpn (its
# peer's), once both have printed them.  Extra environment: $penv.
start() {
	name=$1
	port=$((port + 1))
	# (stdbuf after softverbs-run: an ASan runtime first in LD_PRELOAD
	# must stay first, and stdbuf adds its own)
	# shellcheck disable=SC2086
	timeout 120 ip netns exec "$tag-$2" env $penv $run stdbuf -oL \
		ibv_rc_pingpong $SV -g "$3" -p $port -n "$N" -c \
		>"$log/$name.s" 2>&1 &
	spid=$!
	listening "$2" $port
	# shellcheck disable=SC2086
	timeout 120 ip netns exec "$tag-$4" env $penv $run stdbuf -oL \
		ibv_rc_pingpong $SV -g "$5" -p $port -n "$N" -c $A \
		>"$log/$name.c" 2>&1 &
	cpid=$!
	# the addresses are printed before the QPs' RTR, which opens the
	# door: it must listen before anyone calls it
	if ! wait_for "$log/$name.s" "remote address" ||
		! wait_for "$log/$name.c" "remote address" ||
		! listening "$2" "$DOOR"; then
		fail "$name: the pair did not start"
	fi
	vqpn=$(qpn_of "$log/$name.s")
	pqpn=$(qpn_of "$log/$name.c")
}

# link_bytes NS: bytes received on NS's link connections (the doors' port)
link_bytes() {
	ip netns exec "$tag-$1" ss -Htin state established \
		"( sport = :$DOOR or dport = :$DOOR )" |
		sed -n 's/.*bytes_received:\([0-9]*\).*/\1/p' |
		awk '{s += $1} END {print s + 0}'
}

# finish NAME CNS: after the attacks, both ends still run (with -c a
# wrong byte, and any error of the link, ends them) and the link still
# moves data (CNS's link connections receive more within 0.5 s); then
# the pair is stopped.  Not a count of exchanges: how many the attacks
# take depends on the machine's load.
finish() {
	if ! kill -0 $cpid 2>/dev/null || ! kill -0 $spid 2>/dev/null; then
		wait $cpid
		crc=$?
		wait $spid
		fail "$1: the victim's link broke: client rc $crc, server rc $?"
		sed 's/^/  client: /' "$log/$1.c" | tail -8
		sed 's/^/  server: /' "$log/$1.s" | tail -8
		return
	fi
	b1=$(link_bytes "$2")
	sleep 0.5 # a rate: no event says bytes went
	b2=$(link_bytes "$2")
	kill $cpid $spid
	wait $cpid $spid
	if [ "$b2" -le "$b1" ]; then
		fail "$1: the victim's link stopped moving ($b1 -> $b2 bytes)"
	else
		echo "ok   $1: the ping-pong (data checked) goes on: $((b2 - b1)) bytes in 0.5 s after the attacks"
	fi
}

# attack NAME NS [setpriv...] -- probe args: runs the attacker in NS;
# fails if it was let in; its JSON line is in $log/NAME.json
attack() {
	name=$1 ns=$2
	shift 2
	pre=""
	while [ "$1" != "--" ]; do
		pre="$pre $1"
		shift
	done
	shift
	# shellcheck disable=SC2086
	ip netns exec "$tag-$ns" $pre $atk "$@" >"$log/$name.json" 2>&1
	if ! grep -q '"took": false' "$log/$name.json"; then
		fail "$name: the attacker was let in: $(cut -c1-300 "$log/$name.json")"
	else
		echo "ok   $name: $(sed 's/.*"statuses": \(\[[^]]*\]\).*/\1/' "$log/$name.json")"
	fi
}

raw_of() { sed -n 's/.*"raw": "\([0-9a-f]*\)".*/\1/p' "$log/$1.json"; }

# same_as_none NAME NS [setpriv...]: row NAME's attacker, asking again
# from NS for a QP that does not exist, reads the same bytes: refused
# and "no such QP" cannot be told apart
same_as_none() {
	sn=$1 sns=$2
	shift 2
	bogus=$(printf %06x $(((0x$vqpn ^ 0x5a5a5) & 0xffffff)))
	attack "${sn}_none" "$sns" "$@" -- probe $A "$DOOR" "$bogus" "$pqpn"
	if [ -z "$(raw_of "$sn")" ] ||
		[ "$(raw_of "$sn")" != "$(raw_of "${sn}_none")" ]; then
		fail "$sn: refused and no such QP answered differently:" \
			"$(raw_of "$sn") vs $(raw_of "${sn}_none")"
	else
		echo "ok   $sn: the same $(($(raw_of "$sn" | wc -c) / 2)) bytes as for no such QP"
	fi
}

penv=""
# --- from a third address ---------------------------------------------
start third a "$ga" b "$gb"
attack third_peer_qpn c -- probe $A "$DOOR" "$vqpn" "$pqpn"
attack third_cookie_claim c -- probe $A "$DOOR" "$vqpn" "$pqpn" 1
same_as_none third_peer_qpn c
finish third b

# --- from the peer's host -----------------------------------------------
start peerhost a "$ga" b "$gb"
wrong=$(printf %06x $(((0x$pqpn + 1) & 0xffffff)))
attack peerhost_wrong_qpn b -- probe $A "$DOOR" "$vqpn" "$wrong"
attack peerhost_no_cookie b -- probe $A "$DOOR" "$vqpn" "$pqpn"
same_as_none peerhost_no_cookie b
attack peerhost_cookie_claim b -- probe $A "$DOOR" "$vqpn" "$pqpn" 1
finish peerhost b

# --- a proven hello and proof replayed ----------------------------------
# The link's connection is cut (ss -K: a reset both ways) while b's veth
# is captured; the caller calls again proving the cookie; its hello and
# proof, replayed byte for byte from the caller's host, are refused.
start replay a "$ga" b "$gb"
# the link must be up (it has moved data) before it is cut: the
# addresses print before the QPs call, and a cut before the first call
# cuts nothing (on a loaded machine the reconnection never came)
t=0
until [ "$(link_bytes b)" -gt 0 ]; do
	[ $t -ge 400 ] && break
	t=$((t + 1))
	sleep 0.05 # ss(8) has no event to wait on
done
ip netns exec "$tag-b" "$py" "$here/tcp_attacker.py" sniff "${tag}b" "$DOOR" 20 \
	"$log/cap" >"$log/sniff.out" 2>&1 &
sniffer=$!
wait_for "$log/sniff.out" "ready" || fail "replay: no capture"
ip netns exec "$tag-b" ss -K dst $A dport = "$DOOR" >/dev/null 2>&1
ip netns exec "$tag-b" ss -K src 10.77.0.2 sport = "$DOOR" >/dev/null 2>&1
wait $sniffer
if grep -q "^captured" "$log/sniff.out"; then
	# from the caller's host to the callee's door
	# shellcheck disable=SC2046 # two words: source and destination
	set -- $(sed -n 's/^captured [0-9]* \([0-9.]*\) \([0-9.]*\)/\1 \2/p' "$log/sniff.out")
	case $1 in 10.77.0.1) cns=a ;; *) cns=b ;; esac
	attack replay_proof $cns -- replay "$2" "$DOOR" "$log/cap"
else
	fail "replay: no reconnection captured: $(cat "$log/sniff.out")"
fi
finish replay b

# --- another local user, loopback TCP on one host -------------------------
penv="SOFTVERBS_TRANSPORT=tcp"
start localuser a "$ga" a "$ga"
attack localuser_nobody a setpriv --reuid=65534 --regid=65534 \
	--clear-groups -- probe $A "$DOOR" "$vqpn" "$pqpn"
same_as_none localuser_nobody a setpriv --reuid=65534 --regid=65534 \
	--clear-groups
finish localuser a
penv=""

# --- a shared secret ----------------------------------------------------
head -c 32 /dev/urandom >"$log/s1"
head -c 32 /dev/urandom >"$log/s2"
chmod 600 "$log/s1" "$log/s2"
penv="SOFTVERBS_SECRET_FILE=$log/s1"
start secret_same a "$ga" b "$gb"
attack secret_stranger c -- probe $A "$DOOR" "$vqpn" "$pqpn" 2
finish secret_same b

# secret_bad NAME SERVER_ENV CLIENT_ENV: the client fails within 60 s
# (error exit, not the deadline), and each side said why in one line.
# The server fails too if its own call reaches the client before the
# client is gone; else it waits for a peer that will not come, as on
# hardware (its deadline here: 20 s, then it is killed)
secret_bad() {
	port=$((port + 1))
	start=$(date +%s)
	# shellcheck disable=SC2086
	timeout 20 ip netns exec "$tag-a" env $2 $run ibv_rc_pingpong $SV \
		-g "$ga" -p $port -n 10 >"$log/$1.s" 2>&1 &
	spid=$!
	listening a $port
	# shellcheck disable=SC2086
	timeout 60 ip netns exec "$tag-b" env $3 $run ibv_rc_pingpong $SV \
		-g "$gb" -p $port -n 10 $A >"$log/$1.c" 2>&1
	crc=$?
	wait $spid
	src=$?
	secs=$(($(date +%s) - start))
	sl=$(grep -c "shared secret (SOFTVERBS_SECRET_FILE): refused" "$log/$1.s")
	cl=$(grep -c "shared secret (SOFTVERBS_SECRET_FILE): refused" "$log/$1.c")
	if [ $crc -eq 0 ] || [ $src -eq 0 ] || [ $crc -eq 124 ] ||
		[ "$sl" != 1 ] || [ "$cl" != 1 ]; then
		fail "$1: client rc $crc, server rc $src, lines $sl/$cl"
		sed 's/^/  client: /' "$log/$1.c" | tail -6
		sed 's/^/  server: /' "$log/$1.s" | tail -6
	else
		echo "ok   $1: client failed in ${secs} s (rc $crc, server $src):"
		grep -h "SECRET_FILE" "$log/$1.c" "$log/$1.s" | sed 's/^/       /'
	fi
}
secret_bad secret_wrong "SOFTVERBS_SECRET_FILE=$log/s1" \
	"SOFTVERBS_SECRET_FILE=$log/s2"
secret_bad secret_none_client "SOFTVERBS_SECRET_FILE=$log/s1" ""
secret_bad secret_none_server "" "SOFTVERBS_SECRET_FILE=$log/s1"

[ $failed = 0 ] && echo "PASS" && exit 0
exit 1
