#!/bin/sh
# What the TCP link's proofs cost (issue 24, item 5), across two network
# namespaces (tests/netns/setup.sh): link set-up on the wire (the caller's
# SYN to the callee's OK, seen on b's veth by tcp_attacker.py setup_times)
# for a link's first connection and for reconnections (ss -K cuts the
# connection of a running ibv_rc_pingpong -e, which sleeps in the kernel
# between messages, so the set-up is not queued behind two spinning
# processes; the caller calls again, proving
# the cookie), and 1 MiB ib_send_bw, each without and with
# SOFTVERBS_SECRET_FILE.
#
# usage: bench/tcp_trust.sh BUILD_DIR [PAIRS] [CUTS]   (root)
set -u
build=$1
pairs=${2:-3}
cuts=${3:-5}
run="$build/bin/softverbs-run"
here=$(cd "$(dirname "$0")/../tests/netns" && pwd)
tag="svb$$"
failed=0
log=$(mktemp -d)
# shellcheck source=tests/netns/setup.sh disable=SC2154
. "$here/setup.sh"
A=10.77.0.1
door=${SOFTVERBS_TCP_PORT:-4791}
SV="-d softverbs0"
head -c 32 /dev/urandom >"$log/secret"
chmod 600 "$log/secret"

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'; }

for mode in none secret; do
	penv=""
	[ $mode = secret ] && penv="SOFTVERBS_SECRET_FILE=$log/secret"
	: >"$log/first.$mode"
	: >"$log/again.$mode"
	i=0
	while [ $i -lt "$pairs" ]; do
		i=$((i + 1))
		ip netns exec "$tag-b" python3 "$here/tcp_attacker.py" \
			setup_times "${tag}b" "$door" 120 >"$log/t" 2>&1 &
		sn=$!
		until grep -q ready "$log/t"; do sleep 0.05; done
		port=$((port + 1))
		# shellcheck disable=SC2086
		ip netns exec "$tag-a" env $penv $run ibv_rc_pingpong $SV \
			-g "$ga" -p $port -n 200000 -e >/dev/null 2>&1 &
		sp=$!
		listening a $port
		# shellcheck disable=SC2086
		ip netns exec "$tag-b" env $penv $run ibv_rc_pingpong $SV \
			-g "$gb" -p $port -n 200000 -e $A >/dev/null 2>&1 &
		cp=$!
		until grep -q setup "$log/t"; do sleep 0.05; done
		c=0
		while [ $c -lt "$cuts" ]; do
			c=$((c + 1))
			n=$(grep -c setup "$log/t")
			ip netns exec "$tag-b" ss -K dst $A dport = "$door" >/dev/null 2>&1
			ip netns exec "$tag-b" ss -K src 10.77.0.2 sport = "$door" >/dev/null 2>&1
			t=0
			while [ "$(grep -c setup "$log/t")" -le "$n" ] && [ $t -lt 100 ]; do
				sleep 0.05
				t=$((t + 1))
			done
		done
		kill $cp $sp $sn 2>/dev/null
		wait $cp $sp $sn 2>/dev/null
		grep setup "$log/t" | head -1 | cut -d' ' -f2 >>"$log/first.$mode"
		grep setup "$log/t" | tail -n +2 | cut -d' ' -f2 >>"$log/again.$mode"
	done
	echo "$mode: first connection (us): $(tr '\n' ' ' <"$log/first.$mode")median $(median <"$log/first.$mode")"
	echo "$mode: reconnection (us): $(tr '\n' ' ' <"$log/again.$mode")median $(median <"$log/again.$mode")"
	if command -v ib_send_bw >/dev/null; then
		for r in 1 2 3; do
			port=$((port + 1))
			# shellcheck disable=SC2086
			timeout 120 ip netns exec "$tag-a" env $penv $run ib_send_bw \
				$SV -x "$ga" -p $port -s 1048576 -n 2000 >/dev/null 2>&1 &
			sp=$!
			listening a $port
			# shellcheck disable=SC2086
			bw=$(timeout 120 ip netns exec "$tag-b" env $penv $run \
				ib_send_bw $SV -x "$gb" -p $port -s 1048576 -n 2000 $A |
				awk '$1 == 1048576 {print $4}')
			wait $sp
			echo "$mode: ib_send_bw 1 MiB run $r: ${bw:-failed} MB/s (BW average)"
		done
	fi
done
