#!/bin/sh
# UD between hosts with a shared secret (issue 24 item 5, provider/transport/ud/mac.c):
# across the netns suite's namespaces, ibv_ud_pingpong works when both
# sides have the same SOFTVERBS_SECRET_FILE (IPv4 with full 4096-byte
# datagrams, and IPv6); with a wrong secret, or none on one side, it does
# not complete and the receiver says once that the peer does not prove
# the secret and counts the datagrams (softverbs-stat: ud_auth_drops).
# Then a sender that knows the secret (ud_forge.py) replays a datagram
# and flips a bit of another: both are dropped and counted
# (ud_replay_drops, ud_auth_drops), the good ones still arrive, once,
# and of two refusals the sink says one (once per process).
#
# usage: netns_ud_secret.sh BUILD_DIR
# Needs root and ip(8): otherwise it says why and exits 77 (ctest: skipped).
set -u
build=$1
run="$build/bin/softverbs-run"
stat="$build/bin/softverbs-stat"
sink="$build/tests/sv_ud_sink"
forge="$(dirname "$0")/ud_forge.py"
tag="svu$$"
failed=0
log=$(mktemp -d)

# shellcheck source=tests/netns/setup.sh disable=SC2154
. "$(dirname "$0")/setup.sh"
command -v ibv_ud_pingpong >/dev/null ||
	skip "needs ibv_ud_pingpong (ibverbs-utils)"
command -v python3 >/dev/null || skip "needs python3"

SV="-d softverbs0"
s1="$log/secret1"
s2="$log/secret2"
head -c 32 /dev/urandom >"$s1"
head -c 32 /dev/urandom >"$s2"
chmod 600 "$s1" "$s2"
K1="SOFTVERBS_SECRET_FILE=$s1"
K2="SOFTVERBS_SECRET_FILE=$s2"
NONE="SV_NO_SECRET=1"

pair ud_secret 60 "iters in" b c \
	env "$K1" ibv_ud_pingpong $SV -g "$gb" -p @P -s 4096 -n 2000 -- \
	env "$K1" ibv_ud_pingpong $SV -g "$gc" -p @P -s 4096 -n 2000 10.77.0.2
pair ud_secret_ipv6 60 "iters in" b c \
	env "$K1" ibv_ud_pingpong $SV -g "$gb6" -p @P -s 2048 -- \
	env "$K1" ibv_ud_pingpong $SV -g "$gc6" -p @P -s 2048 10.77.0.2

# pid_in NS COMM: the pid of the process COMM of namespace NS
pid_in() {
	for p in $(ip netns pids "$tag-$1"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && echo "$p" &&
			return
	done
}

# counted PID REGEX: softverbs-stat PID's output matches REGEX within 5 s
# (the table is refreshed every 250 ms)
counted() {
	t=0
	until "$stat" "$2" >"$log/stat" 2>&1 && grep -Eq "$3" "$log/stat"; do
		[ $t -ge 100 ] && return 1
		t=$((t + 1))
		sleep 0.05 # the table is another process's: polled
	done
	cp "$log/stat" "$log/$1.stat"
}

# refused NAME SERVER_ENV CLIENT_ENV WHY: a ping-pong between b (server)
# and c whose sides do not share a secret: the client's first datagram
# is dropped by the server, which says WHY once and counts it; the
# client gets no answer (it is stopped after 5 s).
refused() {
	name=$1 senv=$2 cenv=$3 why=$4
	port=$((port + 1))
	# shellcheck disable=SC2086
	timeout 30 ip netns exec "$tag-b" $run env "$senv" ibv_ud_pingpong \
		$SV -g "$gb" -p $port >"$log/$name.s" 2>&1 &
	spid=$!
	listening b $port
	# shellcheck disable=SC2086
	timeout 5 ip netns exec "$tag-c" $run env "$cenv" ibv_ud_pingpong \
		$SV -g "$gc" -p $port 10.77.0.2 >"$log/$name.c" 2>&1
	rc=$?
	server=$(pid_in b ibv_ud_pingpong)
	if [ $rc -eq 0 ] || grep -q "iters in" "$log/$name.c" ||
		[ -z "$server" ] ||
		! counted "$name" "$server" "ud_auth_drops [1-9]" ||
		[ "$(grep -c "does not prove the shared secret ($why" \
			"$log/$name.s")" != 1 ]; then
		echo "FAIL $name: client rc $rc, server pid '$server'"
		sed 's/^/  client: /' "$log/$name.c" | tail -8
		sed 's/^/  server: /' "$log/$name.s" | tail -8
		sed 's/^/  stat: /' "$log/stat" 2>/dev/null | tail -8
		failed=1
	else
		echo "ok   $name: client stopped (rc $rc); server: $(grep -o \
			"does not prove.*)" "$log/$name.s"); $(grep -o \
			"ud_auth_drops [0-9]*" "$log/$name.stat" | head -1)"
	fi
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}
refused ud_wrong_secret "$K1" "$K2" "its MAC does not check"
refused ud_client_no_secret "$K1" "$NONE" "it sent no MAC"
refused ud_server_no_secret "$NONE" "$K1" "it sent a MAC"

# Multicast between hosts, sealed too: a (secret) sends 20 datagrams to
# an IPv4 group; b (the same secret) takes all 20 from a's address; c
# (no secret) takes none, says why and is stopped after 8 s.
grp=239.77.$(($$ % 250)).9
peer="$build/tests/sv_mcast_peer"
timeout 60 ip netns exec "$tag-b" $run env "$K1" "$peer" recv $grp "$gb" 20 \
	>"$log/mcast.b" 2>&1 &
mb=$!
timeout 8 ip netns exec "$tag-c" $run env "$NONE" "$peer" recv $grp "$gc" 1 \
	>"$log/mcast.c" 2>&1 &
mc=$!
t=0
until grep -q "^joined" "$log/mcast.b" && grep -q "^joined" "$log/mcast.c"; do
	[ $t -ge 200 ] && break
	t=$((t + 1))
	sleep 0.05 # no event says another namespace's program joined
done
timeout 60 ip netns exec "$tag-a" $run env "$K1" "$peer" send $grp "$ga" 20 \
	>"$log/mcast.a" 2>&1
ra=$?
wait $mb
rb=$?
wait $mc
rc=$?
if [ $ra -ne 0 ] || [ $rb -ne 0 ] || [ $rc -eq 0 ] ||
	! grep -q "^received 20 from 10.77.0.1 " "$log/mcast.b" ||
	grep -q "^received" "$log/mcast.c" ||
	! grep -q "does not prove the shared secret (it sent a MAC" \
		"$log/mcast.c"; then
	echo "FAIL ud_secret_multicast: sender rc $ra, receivers rc $rb/$rc"
	for n in a b c; do
		sed "s/^/  $n: /" "$log/mcast.$n" | tail -5
	done
	failed=1
else
	echo "ok   ud_secret_multicast: b $(tail -1 "$log/mcast.b"); c (no secret) took none (rc $rc)"
fi

# A replay and a flipped bit, from a sender that knows the secret
# (ud_forge.py: 7 datagrams, 3 good), to sv_ud_sink in b; the sink runs
# until its stdin (a FIFO the script holds open) closes.
mkfifo "$log/sink.in"
exec 3<>"$log/sink.in"
timeout 60 ip netns exec "$tag-b" $run env "$K1" "$sink" \
	<"$log/sink.in" >"$log/sink.out" 2>&1 3>&- &
kpid=$!
t=0
until grep -q "^qpn " "$log/sink.out"; do
	[ $t -ge 200 ] && break
	t=$((t + 1))
	sleep 0.05 # no event says another namespace's program is ready
done
qpn=$(sed -n 's/^qpn \([0-9]*\) pid.*/\1/p' "$log/sink.out")
spid=$(sed -n 's/^qpn [0-9]* pid \([0-9]*\)/\1/p' "$log/sink.out")
ip netns exec "$tag-a" python3 "$forge" "$s1" 10.77.0.2 "${qpn:-0}" \
	>"$log/forge" 2>&1 3>&-
t=0
until grep -q "^got old-2" "$log/sink.out"; do
	[ $t -ge 200 ] && break
	t=$((t + 1))
	sleep 0.05
done
counted forged "${spid:-0}" "ud_auth_drops 2 .*ud_replay_drops 2"
cnt=$?
exec 3>&-
wait $kpid
krc=$?
got=$(grep "^got " "$log/sink.out" | tr '\n' ' ')
if [ $krc -ne 0 ] || [ $cnt -ne 0 ] ||
	[ "$got" != "got good-1 got good-4 got old-2 " ] ||
	! grep -q "^received 3" "$log/sink.out" ||
	[ "$(grep -c "does not prove the shared secret" "$log/sink.out")" != 1 ]; then
	echo "FAIL ud_replay_and_flip: sink rc $krc, took '$got'"
	sed 's/^/  sink: /' "$log/sink.out" | tail -8
	sed 's/^/  forge: /' "$log/forge" | tail -5
	sed 's/^/  stat: /' "$log/stat" 2>/dev/null | tail -8
	failed=1
else
	echo "ok   ud_replay_and_flip: took $got; $(grep -o \
		"ud_drops.*ud_replay_drops [0-9]*" "$log/forged.stat" | head -1)"
fi

exit $failed
