#!/bin/sh
# Issue 26: softverbs to softverbs over the RoCEv2 transport
# (SOFTVERBS_TRANSPORT=roce) across network namespaces (tests/netns/
# setup.sh's three on a bridge): Debian's unmodified ibv_rc_pingpong with
# its bytes checked (-c) at one byte, a size with pad and several
# packets, one MTU's worth of packets, 64 KiB and 1 MiB (trains of 16
# packets, and more than the receive ring); perftest's RDMA write, read
# and atomics, whose answers are RoCE responses; then with packets lost
# and RNR NAKs made up (SOFTVERBS_FAULTS).  softverbs_roce0, the
# Ethernet device, with no SOFTVERBS_TRANSPORT: a pingpong whose packets
# are captured, and ib_write_bw at the port's MTU.  Path MTU 1024 (the
# veth's 1500 bytes cannot carry 4096-byte packets: IP_PMTUDISC_DO).
# Then the capture: every UDP 4791 packet of a pingpong and of a read and
# an atomic run, both ways, parsed by the codec with its ICRC checked
# against the IP and UDP headers as captured (we send IP ID 0, or the
# IDs 0, 1, 2... the kernel gives the datagrams it cuts from a UDP GSO
# run, so every one can be), and decoded by tshark as InfiniBand, none
# malformed.
# rdma_cm_*: rping, ucmatose and ib_send_bw -R over the IB CM's MADs,
# udaddy over SIDR; MADs the kernel gave the wrong process of a host
# passed to the right one (two clients at once, a first REQ among other
# listeners and a UD door, and a hostile process of the host).
#
# usage: netns_roce.sh BUILD_DIR
# Needs root and ip(8): otherwise it says why and exits 77 (skipped).
set -u
build=$1
# shellcheck disable=SC2034 # setup.sh runs programs with it
run="$build/bin/softverbs-run"
tag="svr$$"
failed=0
log=$(mktemp -d)
export SOFTVERBS_TRANSPORT=roce

# shellcheck source=tests/netns/setup.sh disable=SC2154
. "$(dirname "$0")/../netns/setup.sh"
command -v ibv_rc_pingpong >/dev/null ||
	skip "needs ibv_rc_pingpong (ibverbs-utils)"

# SV_ROCE_ROWS="PATTERN...": only the rows whose names match one of these
# shell patterns ("capture" for the capture); all by default
rows=${SV_ROCE_ROWS:-*}
want() {
	set -f
	for p in $rows; do
		# shellcheck disable=SC2254 # the pattern is the point
		case $1 in $p)
			set +f
			return 0
			;;
		esac
	done
	set +f
	return 1
}
row() { ! want "$1" || pair "$@"; }

# cap_start FILE: tshark captures a's veth's RoCEv2 into FILE (pcap),
# once it says it captures (30 s at most); cap_stop ends it, after the
# last packets went into the file.  A veth carries a UDP GSO run whole
# (SOFTVERBS_ROCE_GSO): while it captures, both ends of a's link cut
# runs, as a NIC does, so the capture holds the datagrams the kernel
# made, their IP IDs 0, 1, 2..., each ICRC checked against its ID
cap_start() {
	ip -n "$tag-a" link set "${tag}a" gso_max_segs 1
	ip -n "$tag-hub" link set "${tag}a-h" gso_max_segs 1
	ip netns exec "$tag-a" tshark -i "${tag}a" -f "udp port 4791" \
		-F pcap -w "$1" >"$1.log" 2>&1 &
	cap_pid=$!
	t=0
	until grep -q Capturing "$1.log"; do
		t=$((t + 1))
		[ $t -lt 300 ] || { echo "FAIL tshark: $(cat "$1.log")"; exit 1; }
		sleep 0.1 # polling its log, under the deadline above
	done
}
cap_stop() {
	sleep 1 # the last packets into the file (no event says they went)
	kill -INT $(pgrep -P "$cap_pid") 2>/dev/null
	wait "$cap_pid"
	ip -n "$tag-a" link set "${tag}a" gso_max_segs 65535
	ip -n "$tag-hub" link set "${tag}a-h" gso_max_segs 65535
}

A=10.77.0.1
SV="-d softverbs0"

# The pid of program prog in namespace ns (one of ours: the namespace is)
pid_in() {
	for p in $(ip netns pids "$tag-$1"); do
		[ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$2" ] && echo "$p"
	done | head -1
}
# Waits for file $1 (deadline $2 s): 0 when it came
wait_file() {
	t=0
	until [ -e "$1" ]; do
		t=$((t + 1))
		[ $t -lt $(($2 * 10)) ] || return 1
		sleep 0.1 # another process's file: no event
	done
}
UDX=$build/tests/ud_demux
ud_demux_rows() { # NQP: the sender's QPs
	d=$log/udd$1
	mkdir "$d"
	for i in 1 2 3; do
		# shellcheck disable=SC2086
		timeout 90 ip netns exec "$tag-b" $run env -u SOFTVERBS_TRANSPORT \
			"$UDX" recv "$d" r$i 120 0x1234 $A >"$d.r$i" 2>&1 &
	done
	# shellcheck disable=SC2086
	timeout 90 ip netns exec "$tag-a" $run env -u SOFTVERBS_TRANSPORT \
		"$UDX" send "$d" "$ra" "$1" 120 0x1234 10.77.0.2 r1 r2 r3 \
		>"$d.s" 2>&1
	src=$?
	ok=1
	for i in 1 2 3; do
		wait_file "$d/r$i.done" 30 || ok=0
	done
	echo 1 >"$d/end"
	wait
	for i in 1 2 3; do
		grep -q "received 120, all its own" "$d.r$i" || ok=0
	done
	if [ $src != 0 ] || [ $ok != 1 ]; then
		echo "FAIL ud_demux_$1: sender rc $src"
		tail -n 3 "$d.s" "$d.r1" "$d.r2" "$d.r3"
		failed=1
	else
		echo "ok   ud_demux_$1: 3 processes on one host, each took its own 120 of 360 from $1 sender QP(s)"
	fi
}
# Hostile datagrams to a UD QP of softverbs_roce0 from a plain UDP socket:
# a wrong Q_Key, a QPN nobody has, a short one, a bad ICRC (from a
# sender whose first packet showed IP ID 0), an RC opcode; the receiver
# takes only the 2 good ones, and softverbs-stat counts each drop
ud_hostile_row() {
	d=$log/udh
	mkdir "$d"
	# shellcheck disable=SC2086
	timeout 60 ip netns exec "$tag-b" $run env -u SOFTVERBS_TRANSPORT \
		"$UDX" recv "$d" h 2 0x1234 $A >"$log/udh.r" 2>&1 &
	timeout 60 ip netns exec "$tag-a" "$UDX" hostile "$d" 0x1234 10.77.0.2 h \
		>"$log/udh.s" 2>&1
	src=$?
	wait_file "$d/h.done" 30
	rp=$(pid_in b ud_demux)
	want_ctrs="roce_drop_short roce_drop_icrc roce_drop_qpt roce_drop_qpn ud_drops"
	t=0
	seen=""
	while [ $t -lt 50 ] && [ -n "$rp" ]; do
		# (the context's totals of softverbs-stat --json; the names split
		# on purpose)
		# shellcheck disable=SC2086
		seen=$(ip netns exec "$tag-b" "$build/bin/softverbs-stat" --json "$rp" |
			python3 -c 'import json,sys
t=json.loads(sys.stdin.read())
t=t[0]["total"] if isinstance(t,list) else t["contexts"][0]["total"]
print(" ".join("%s=%d" % (k, t[k]) for k in sys.argv[1:]))' $want_ctrs 2>&1)
		case "$seen" in *=0*) ;; *) break ;; esac
		t=$((t + 1))
		sleep 0.1 # the table is refreshed every 250 ms
	done
	echo 1 >"$d/end"
	wait
	all=0
	case "$seen" in *=[1-9]*\ *=[1-9]*\ *=[1-9]*\ *=[1-9]*\ *=[1-9]*) all=1 ;; esac
	if [ $src != 0 ] || ! grep -q "received 2, all its own" "$log/udh.r" ||
		[ $all != 1 ]; then
		echo "FAIL ud_hostile: sender rc $src, counters: $seen"
		tail -n 3 "$log/udh.s" "$log/udh.r"
		failed=1
	else
		echo "ok   ud_hostile: 2 good of 7 taken; dropped and counted: $seen"
	fi
}
for s in 1 1025 4096 65536; do
	row "rc_pingpong_$s" 60 "iters in" a b \
		ibv_rc_pingpong $SV -g "$ga" -p @P -s $s -n 200 -c -- \
		ibv_rc_pingpong $SV -g "$gb" -p @P -s $s -n 200 -c $A
done
row rc_pingpong_1MiB 120 "iters in" b c \
	ibv_rc_pingpong $SV -g "$gb" -p @P -s 1048576 -n 20 -c -- \
	ibv_rc_pingpong $SV -g "$gc" -p @P -s 1048576 -n 20 -c 10.77.0.2
# SRQ (issue 26 item 2): the server's 16 RC QPs share its SRQ, each on its
# own RoCE link; UC (IBA 9.8): UC opcodes, no ACKs, a sent message done
for s in 1 1025 4096 65536; do
	row "srq_pingpong_$s" 90 "iters in" a b \
		ibv_srq_pingpong $SV -g "$ga" -p @P -s $s -n 50 -c -- \
		ibv_srq_pingpong $SV -g "$gb" -p @P -s $s -n 50 -c $A
	row "uc_pingpong_$s" 60 "iters in" a b \
		ibv_uc_pingpong $SV -g "$ga" -p @P -s $s -n 200 -c -- \
		ibv_uc_pingpong $SV -g "$gb" -p @P -s $s -n 200 -c $A
done
# UD over RoCEv2 (BTH + DETH to port 4791, docs/roce.md "UD"): with
# SOFTVERBS_TRANSPORT=roce on softverbs0 too, sizes up to the path MTU
for s in 1 1024; do
	row "ud_pingpong_$s" 60 "iters in" a b \
		ibv_ud_pingpong $SV -g "$ga" -p @P -s $s -n 200 -c -- \
		ibv_ud_pingpong $SV -g "$gb" -p @P -s $s -n 200 -c $A
done

# softverbs_roce0 (issue 26 item 1, issue 28 item 7): the device with an
# Ethernet port, chosen by -d alone, SOFTVERBS_TRANSPORT unset; the GID
# index from its own table as ibv_devinfo prints a RoCE v2 entry (rxe's
# layout: the default GID at 0, the veth's IPv4 address at 1).  A capture
# on a's veth proves the wire: the pingpong's packets are RoCEv2 on UDP
# 4791, each parsed with its ICRC checked (over TCP there would be none);
# then RoCEv2 over IPv6, the GIDs of the veths' fd00:5e::x.
roce_gid_of() {
	in_ns "$1" ibv_devinfo -d softverbs_roce0 -v | sed -n \
		's/.*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:10\.77\.0\.'"$2"', RoCE v2$/\1/p' |
		head -1
}
# the port follows its interface: c's veth at MTU 9000 gives active_mtu
# 4096, down gives PORT_DOWN; then back as it was
ip -n "$tag-c" link set "${tag}c" mtu 9000
o9=$(in_ns c ibv_devinfo -d softverbs_roce0)
ip -n "$tag-c" link set "${tag}c" down
od=$(in_ns c ibv_devinfo -d softverbs_roce0)
ip -n "$tag-c" link set "${tag}c" mtu 1500 up
o15=$(in_ns c ibv_devinfo -d softverbs_roce0)
if echo "$o9" | grep -q "active_mtu:[[:space:]]*4096 (5)" &&
	echo "$o9" | grep -q "PORT_ACTIVE" &&
	echo "$od" | grep -q "PORT_DOWN" &&
	echo "$o15" | grep -q "active_mtu:[[:space:]]*1024 (3)" &&
	echo "$o15" | grep -q "link_layer:[[:space:]]*Ethernet"; then
	echo "ok   roce_dev_port: MTU 9000 -> 4096, down -> PORT_DOWN, 1500 -> 1024"
else
	echo "FAIL roce_dev_port: the port does not follow ${tag}c"
	printf '%s\n---\n%s\n---\n%s\n' "$o9" "$od" "$o15" | grep -E "state|mtu|---"
	failed=1
fi
ra=$(roce_gid_of a 1)
rb=$(roce_gid_of b 2)
R="env -u SOFTVERBS_TRANSPORT"
if [ "$ra" != 1 ] || [ "$rb" != 1 ]; then
	echo "FAIL roce_dev_gids: the veth's RoCE v2 GID at '$ra'/'$rb', not 1"
	in_ns a ibv_devinfo -d softverbs_roce0 -v | tail -12
	failed=1
elif command -v tshark >/dev/null; then
	# (its capture and wire check only with its row: SV_ROCE_ROWS)
	if want roce_dev_rc_pingpong; then
		rcap=$log/roce_dev.pcap
		cap_start "$rcap"
		row roce_dev_rc_pingpong 60 "iters in" a b \
			$R ibv_rc_pingpong -d softverbs_roce0 -g "$ra" -p @P -s 4096 -n 50 -c -- \
			$R ibv_rc_pingpong -d softverbs_roce0 -g "$rb" -p @P -s 4096 -n 50 -c $A
		cap_stop
		"$build/tests/roce_gen" parse "$rcap" >"$log/rverdicts" ||
			{ echo "FAIL roce_gen parse (roce_dev)"; failed=1; }
		n=$(wc -l <"$log/rverdicts")
		bad=$(grep -vc '^ok ' "$log/rverdicts")
		# 50 round trips of 4 packets each way, and their ACKs
		if [ "$n" -lt 400 ] || [ "$bad" != 0 ]; then
			echo "FAIL roce_dev_wire: $n RoCEv2 packets, $bad refused"
			failed=1
		else
			echo "ok   roce_dev_wire: $n RoCEv2 packets, every ICRC checked"
		fi
	fi
	# UD (issue 26): ibv_ud_pingpong with every byte checked (-c), at
	# sizes up to the port's MTU (1024: the program refuses more); its
	# packets captured: each parsed with its ICRC checked, UD SEND_ONLY
	# (opcode 100) with a DETH, from rxe's UDP source port for the QP
	# (0xc000 and up), decoded by tshark with a DETH and no error
	if want "roce_dev_ud*"; then
		ucap=$log/roce_ud.pcap
		cap_start "$ucap"
		for s in 1 513 1024; do
			row "roce_dev_ud_pingpong_$s" 60 "iters in" a b \
				$R ibv_ud_pingpong -d softverbs_roce0 -g "$ra" -p @P -s $s -n 100 -c -- \
				$R ibv_ud_pingpong -d softverbs_roce0 -g "$rb" -p @P -s $s -n 100 -c $A
		done
		cap_stop
		"$build/tests/roce_gen" parse "$ucap" >"$log/uverdicts" ||
			{ echo "FAIL roce_gen parse (UD)"; failed=1; }
		n=$(wc -l <"$log/uverdicts")
		bad=$(grep -vc '^ok 100 ' "$log/uverdicts")
		tshark -n -r "$ucap" -T fields -E separator=\| \
			-e infiniband.bth.opcode -e infiniband.deth.srcqp \
			-e udp.srcport -e _ws.malformed -e _ws.expert.severity \
			>"$log/uts" 2>&1
		tn=$(awk -F'|' '$1 == 100 && $2 != "" && $3 >= 49152 &&
			$4 == "" && ($5 == "" || $5 < 6291456)' "$log/uts" | wc -l)
		# 3 runs of 100 round trips, 2 datagrams each
		if [ "$n" -lt 600 ] || [ "$bad" != 0 ] || [ "$tn" != "$n" ]; then
			echo "FAIL roce_dev_ud_wire: $n packets, $bad not UD SEND_ONLY with a right ICRC, $tn decoded by tshark as UD"
			grep -v '^ok 100 ' "$log/uverdicts" | sort | uniq -c | head -5
			head -3 "$log/uts"
			failed=1
		else
			echo "ok   roce_dev_ud_wire: $n RoCEv2 UD SEND_ONLY packets, every ICRC checked, tshark decodes a DETH in each"
		fi
	fi
	# several processes on one host share port 4791: three receivers in
	# b, one sender in a with 4 QPs (4 UDP source ports, which the kernel
	# spreads over the receivers' listeners), then with 1 (one 4-tuple:
	# one listener gets all, so two receivers get theirs only from
	# another process's listener); each receiver takes exactly its own
	# 120, checked byte by byte (ud_demux.c)
	if want ud_demux; then
		ud_demux_rows 4
		ud_demux_rows 1
	fi
	if want ud_hostile; then
		ud_hostile_row
	fi
	row roce_dev_uc_pingpong 60 "iters in" a b \
		$R ibv_uc_pingpong -d softverbs_roce0 -g "$ra" -p @P -s 4096 -n 50 -c -- \
		$R ibv_uc_pingpong -d softverbs_roce0 -g "$rb" -p @P -s 4096 -n 50 -c $A
	if command -v ib_write_bw >/dev/null; then
		# no -m: perftest takes the port's active MTU (1024 on 1500)
		row roce_dev_ib_write_bw 90 "^ 65536 " a b \
			$R ib_write_bw -d softverbs_roce0 -x "$ra" -p @P -s 65536 -n 200 -- \
			$R ib_write_bw -d softverbs_roce0 -x "$rb" -p @P -s 65536 -n 200 $A
	fi
else
	echo "note: no tshark: the softverbs_roce0 rows skipped"
fi
# RoCEv2 over IPv6: the device's GID of the veth's fd00:5e::x address
ra6=$(in_ns a ibv_devinfo -d softverbs_roce0 -v |
	sed -n 's/.*GID\[ *\([0-9]*\)\]:[[:space:]]*fd00:5e::1, RoCE v2$/\1/p')
rb6=$(in_ns b ibv_devinfo -d softverbs_roce0 -v |
	sed -n 's/.*GID\[ *\([0-9]*\)\]:[[:space:]]*fd00:5e::2, RoCE v2$/\1/p')
if [ -n "$ra6" ] && [ -n "$rb6" ]; then
	row roce_dev_rc_pingpong_ipv6 60 "iters in" a b \
		$R ibv_rc_pingpong -d softverbs_roce0 -g "$ra6" -p @P -s 4096 -n 50 -c -- \
		$R ibv_rc_pingpong -d softverbs_roce0 -g "$rb6" -p @P -s 4096 -n 50 -c $A
else
	echo "FAIL roce_dev_ipv6_gids: no RoCE v2 GID of fd00:5e::1/2 ('$ra6'/'$rb6')"
	failed=1
fi

if command -v ib_write_bw >/dev/null; then
	P="-m 1024"
	row ib_write_bw 90 "^ 65536 " a c \
		ib_write_bw $SV -x "$ga" $P -p @P -s 65536 -n 200 -- \
		ib_write_bw $SV -x "$gc" $P -p @P -s 65536 -n 200 $A
	row ib_read_bw_1MiB 120 "^ 1048576 " a b \
		ib_read_bw $SV -x "$ga" $P -p @P -s 1048576 -n 20 -- \
		ib_read_bw $SV -x "$gb" $P -p @P -s 1048576 -n 20 $A
	row ib_read_lat 90 "^ 2048 " b a \
		ib_read_lat $SV -x "$gb" $P -p @P -s 2048 -n 200 -- \
		ib_read_lat $SV -x "$ga" $P -p @P -s 2048 -n 200 10.77.0.2
	row ib_atomic_lat 90 "^ 8 " a b \
		ib_atomic_lat $SV -x "$ga" $P -p @P -n 200 -- \
		ib_atomic_lat $SV -x "$gb" $P -p @P -n 200 $A
else
	echo "note: no perftest: its rows skipped"
fi

# UC with datagrams lost on arrival (SOFTVERBS_FAULTS drop on the UC
# receiver: a true PSN gap): a message that lost a packet goes whole, the
# next FIRST starts afresh, every receive holds one whole message
if want uc_loss; then
	d=$log/ucl
	mkdir "$d"
	# shellcheck disable=SC2086
	timeout 60 ip netns exec "$tag-b" env SOFTVERBS_FAULTS=drop=0.05,seed=5 \
		$run "$build/tests/uc_loss" recv "$d" "$gb" $A 300 3000 \
		>"$log/ucl.r" 2>&1 &
	rpid=$!
	# shellcheck disable=SC2086
	timeout 60 ip netns exec "$tag-a" $run "$build/tests/uc_loss" send \
		"$d" "$ga" 10.77.0.2 300 3000 >"$log/ucl.s" 2>&1
	src=$?
	wait $rpid
	rrc=$?
	if [ $src != 0 ] || [ $rrc != 0 ]; then
		echo "FAIL uc_loss: sender rc $src, receiver rc $rrc"
		sed 's/^/  sender: /' "$log/ucl.s" | tail -5
		sed 's/^/  receiver: /' "$log/ucl.r" | tail -5
		failed=1
	else
		echo "ok   uc_loss: $(cat "$log/ucl.r")"
	fi
fi

# Loss (SOFTVERBS_FAULTS drop, both sides: each drops 1% of what it
# receives; a 16-packet message then goes whole 85% of the time, so
# retry_cnt 7 timeouts in a row, RETRY_EXC_ERR, are rare, under ASan
# too): NAK-seq, the ACK timer and duplicates, the engine's over RoCE;
# and RNR NAKs made up, answered by resends after the timer.
export SOFTVERBS_FAULTS=drop=0.01,seed=3
row rc_pingpong_drop 120 "iters in" a b \
	ibv_rc_pingpong $SV -g "$ga" -p @P -s 16384 -n 100 -c -- \
	ibv_rc_pingpong $SV -g "$gb" -p @P -s 16384 -n 100 -c $A
if command -v ib_read_lat >/dev/null; then
	row ib_read_lat_drop 120 "^ 4096 " b c \
		ib_read_lat $SV -x "$gb" -m 1024 -p @P -s 4096 -n 200 -- \
		ib_read_lat $SV -x "$gc" -m 1024 -p @P -s 4096 -n 200 10.77.0.2
fi
export SOFTVERBS_FAULTS=rnr=0.1,seed=2
row rc_pingpong_rnr 120 "iters in" a c \
	ibv_rc_pingpong $SV -g "$ga" -p @P -s 3000 -n 100 -c -- \
	ibv_rc_pingpong $SV -g "$gc" -p @P -s 3000 -n 100 -c $A
unset SOFTVERBS_FAULTS

# The connection manager over RoCE (issue 26 item 3): Debian's rdma_cm
# programs on our librdmacm, which with SOFTVERBS_TRANSPORT=roce speaks
# the IB CM's MADs on QP1 (rdmacm/ib_link.c) to the other namespace:
# rping with every ping validated, ucmatose, perftest's -R
row rdma_cm_rping 120 "rdma-ping-99:" a b \
	rping -s -a $A -p @P -C 100 -- \
	rping -c -a $A -p @P -v -V -C 100
row rdma_cm_ucmatose 120 "return status 0" a b \
	ucmatose -p @P -- \
	ucmatose -s $A -p @P
# QP pairs that share one UDP source port (transport/roce/share.c): with
# SOFTVERBS_ROCE_SPORT on both sides every pair has one four-tuple, so the
# kernel hands each datagram to one of the process's sockets for it, and
# the links pass each other what is not theirs.  16 QPs on an SRQ with
# every byte checked (it passes without the sharing too: its count is of
# all QPs' receives); 8 QPs of ib_write_bw and ucmatose's 50 connections
# at once, which fail without it (the pairs whose datagrams went to
# another link's socket were never answered: among 100 connections two
# share a port one run in four, and ucmatose -c 100 hung)
export SOFTVERBS_ROCE_SPORT=50000
row roce_one_sport_srq_pingpong 90 "iters in" a b \
	ibv_srq_pingpong $SV -g "$ga" -p @P -s 4096 -n 50 -c -- \
	ibv_srq_pingpong $SV -g "$gb" -p @P -s 4096 -n 50 -c $A
row roce_one_sport_write_bw 90 "^ 65536 " a b \
	ib_write_bw $SV -x "$ga" -m 1024 -p @P -q 8 -s 65536 -n 200 -- \
	ib_write_bw $SV -x "$gb" -m 1024 -p @P -q 8 -s 65536 -n 200 $A
row rdma_cm_one_sport_ucmatose 120 "return status 0" a b \
	ucmatose -p @P -c 50 -- \
	ucmatose -s $A -p @P -c 50
unset SOFTVERBS_ROCE_SPORT
# bw_pair NAME PORT SECONDS: ib_write_bw -D SECONDS between a (server,
# NAME.s, pid s_pid) and b (client, NAME.c, pid c_pid) in the background
bw_pair() {
	# shellcheck disable=SC2086 # $run is a command line
	timeout 90 ip netns exec "$tag-a" $run ib_write_bw $SV -x "$ga" \
		-m 1024 -p "$2" -D "$3" >"$log/$1.s" 2>&1 &
	s_pid=$!
	listening a "$2"
	# shellcheck disable=SC2086
	timeout 90 ip netns exec "$tag-b" $run ib_write_bw $SV -x "$gb" \
		-m 1024 -p "$2" -D "$3" $A >"$log/$1.c" 2>&1 &
	c_pid=$!
}
# claims N: until a and b each show N sockets named after a RoCEv2 claim
# (share.c: the claim, and each relay it accepted), 30 s at most
claims() {
	t=0
	until [ "$(ip netns exec "$tag-a" grep -c softverbs-roce /proc/net/unix)" -ge "$1" ] &&
		[ "$(ip netns exec "$tag-b" grep -c softverbs-roce /proc/net/unix)" -ge "$1" ] ||
		[ $t -ge 300 ]; do
		t=$((t + 1))
		sleep 0.1 # another namespace's sockets: no event says
	done
}
# Two processes' pairs on one four-tuple: the first process's claim
# relays the second's datagrams to it (share.c), so the second pair runs
# its ping-pong to the end while the first streams (without the relay,
# its move to RTR failed with EADDRINUSE; before the claim, it was up
# and never answered); the first pair runs on to its end
if want roce_one_sport_two_processes; then
	export SOFTVERBS_ROCE_SPORT=50001
	p1=$((port + 1))
	p2=$((port + 2))
	port=$p2
	bw_pair x1 $p1 8
	s1=$s_pid c1=$c_pid
	claims 1 # the first pair is up once both ends claimed the four-tuple
	t0=$(date +%s)
	# shellcheck disable=SC2086
	timeout 60 ip netns exec "$tag-a" $run ibv_rc_pingpong $SV -g "$ga" \
		-p $p2 -n 10 >"$log/x2.s" 2>&1 &
	s2=$!
	listening a $p2
	# shellcheck disable=SC2086
	timeout 60 ip netns exec "$tag-b" $run ibv_rc_pingpong $SV -g "$gb" \
		-p $p2 -n 10 $A >"$log/x2.c" 2>&1
	rc2=$?
	wait $s2
	src2=$?
	took=$(($(date +%s) - t0))
	wait $c1
	rc1=$?
	wait $s1
	src1=$?
	unset SOFTVERBS_ROCE_SPORT
	said=$(cat "$log/x2.c" "$log/x2.s" | grep -c "softverbs: ")
	if [ $rc1 != 0 ] || [ $src1 != 0 ] || [ $rc2 != 0 ] ||
		[ $src2 != 0 ] || [ $took -gt 20 ] || [ "$said" != 0 ]; then
		echo "FAIL roce_one_sport_two_processes: first pair $rc1/$src1," \
			"second $rc2/$src2 in ${took}s, said $said"
		tail -5 "$log/x1.c" | sed 's/^/  first client: /'
		tail -5 "$log/x2.c" | sed 's/^/  second client: /'
		tail -5 "$log/x2.s" | sed 's/^/  second server: /'
		failed=1
	else
		echo "ok   roce_one_sport_two_processes: the second pair relayed" \
			"to its end in ${took}s, the first ran on"
	fi
fi
# The claiming process killed mid-stream: a second pair, relayed on both
# hosts by the first pair's ends, streams on.  Its server's relay ends at
# once (EOF) and it claims the four-tuple; its client's, when the first
# client gives up (its retries run out) and exits; what was lost between,
# the peers resend.  Without the take-over the second pair heard nothing
# more and failed (transport retry counter exceeded)
if want roce_one_sport_owner_killed; then
	export SOFTVERBS_ROCE_SPORT=50002
	p1=$((port + 1))
	p2=$((port + 2))
	port=$p2
	bw_pair k1 $p1 20
	s1=$s_pid c1=$c_pid
	claims 1 # the first pair is up once both ends claimed the four-tuple
	bw_pair k2 $p2 6
	s2=$s_pid c2=$c_pid
	# the second pair streams once each claim accepted its relay (which
	# it does at the first datagram for it)
	claims 2
	sleep 1 # mid-stream
	kill -9 "$(pgrep -f "^ib_write_bw .* -p $p1 -D 20$" | head -1)" 2>/dev/null
	wait $c2
	rc2=$?
	wait $s2
	src2=$?
	wait $c1
	rc1=$?
	wait $s1
	unset SOFTVERBS_ROCE_SPORT
	if [ $rc2 != 0 ] || [ $src2 != 0 ] || [ $rc1 = 0 ] ||
		! grep -q "^ 65536 " "$log/k2.c"; then
		echo "FAIL roce_one_sport_owner_killed: second pair $rc2/$src2," \
			"first client $rc1"
		tail -5 "$log/k1.c" | sed 's/^/  first client: /'
		tail -5 "$log/k2.c" | sed 's/^/  second client: /'
		tail -5 "$log/k2.s" | sed 's/^/  second server: /'
		failed=1
	else
		echo "ok   roce_one_sport_owner_killed: the second pair streamed" \
			"on: $(grep "^ 65536 " "$log/k2.c" | tail -1)"
	fi
fi
row rdma_cm_send_bw 120 "^ 65536" a b \
	ib_send_bw -R $SV -p @P -n 200 -- \
	ib_send_bw -R $SV -p @P -n 200 $A

# MAD retransmission (issue 26 item 3): both sides lose MADs on purpose
# (SOFTVERBS_CM_MAD_DROP: the client its first 2 REQs, its first RTU
# and its DREQ, the server its first 2 REPs), each try 300 ms
# (SOFTVERBS_CM_TIMEOUT_MS 4800 / 16): the REQ and REP are resent (a REQ
# again answered with the REP again, a REP again with the RTU again),
# rping connects and every ping is validated; the client's DREQ is
# resent after rping destroyed its id and the persistent server's
# connection ends DISCONNECTED (without: it waits for ever); the server sent its REP
# once as new (one connection, not two), and its softverbs-stat shows
# the IB CM's counters (MADs sent, resent, 2 lost on purpose).  Without the resending the
# client ends UNREACHABLE.
if want rdma_cm_mad_loss; then
	port=$((port + 1))
	timeout 120 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 \
		SOFTVERBS_CM_TIMEOUT_MS=4800 SOFTVERBS_CM_MAD_DROP=rep=2 \
		$run rping -s -P -a $A -p $port -C 100 >"$log/ml.s" 2>&1 &
	spid=$!
	listening a $port
	timeout 60 ip netns exec "$tag-b" env SOFTVERBS_DEBUG=1 \
		SOFTVERBS_CM_TIMEOUT_MS=4800 \
		SOFTVERBS_CM_MAD_DROP=req=2,rtu=1,dreq=1 \
		$run rping -c -a $A -p $port -v -V -C 100 >"$log/ml.c" 2>&1
	rc=$?
	# the client's DREQ, lost, resent after rping destroyed its id (its
	# exit waits for the DREP): the persistent server's connection ends
	t=0
	until grep -q "queued RDMA_CM_EVENT_DISCONNECTED" "$log/ml.s" ||
		[ $t -ge 50 ]; do
		t=$((t + 1))
		sleep 0.1 # polling the server's log, under this deadline
	done
	disc=$(grep -c "queued RDMA_CM_EVENT_DISCONNECTED" "$log/ml.s")
	# the persistent server's IB CM counters (softverbs-stat's context 0)
	rp=$(pid_in a rping)
	ctrs=$(ip netns exec "$tag-a" "$build/bin/softverbs-stat" --json "$rp" |
		python3 -c 'import json,sys
t=json.loads(sys.stdin.read())
cs=t if isinstance(t,list) else t["contexts"]
for c in cs:
	if "cm_mad_sent" in c["total"]:
		print(" ".join("%s=%d" % (k, c["total"][k]) for k in sys.argv[1:]))' \
			cm_mad_sent cm_mad_resent cm_mad_drop_fault cm_mad_dup_req \
			cm_mad_dup_rep cm_mad_recv 2>&1)
	kill "$spid" 2>/dev/null
	wait $spid 2>/dev/null
	lost_c=$(grep -c "lost on purpose" "$log/ml.c")
	lost_s=$(grep -c "lost on purpose" "$log/ml.s")
	req_again=$(grep -c "MAD 0x0010 resent" "$log/ml.c")
	rep_new=$(grep -c "MAD 0x0013 sent" "$log/ml.s")
	case "$ctrs" in
	cm_mad_sent=[1-9]*\ cm_mad_resent=[1-9]*\ cm_mad_drop_fault=2\ *) ;;
	*) rep_new="$rep_new (counters: $ctrs)" ;;
	esac
	if [ $rc != 0 ] || [ "$lost_c" != 4 ] || [ "$disc" != 1 ] ||
		[ "$lost_s" != 2 ] || [ "$req_again" -lt 2 ] ||
		[ "$rep_new" != 1 ] || ! grep -q "rdma-ping-99:" "$log/ml.c"; then
		echo "FAIL rdma_cm_mad_loss: client $rc, disconnected $disc, lost" \
			"$lost_c/$lost_s, REQs resent $req_again, REPs new $rep_new"
		grep -v "^softverbs\[" "$log/ml.c" | tail -5 | sed 's/^/  client: /'
		grep -v "^softverbs\[" "$log/ml.s" | tail -5 | sed 's/^/  server: /'
		failed=1
	else
		echo "ok   rdma_cm_mad_loss: $lost_c and $lost_s MADs lost," \
			"$req_again REQs resent, one REP, rping -V -C 100 done;" \
			"server's $ctrs"
	fi
fi

# A REP whose retries run out (the server loses every REP it sends; each
# try 100 ms): the server's id ends RDMA_CM_EVENT_UNREACHABLE with
# -ETIMEDOUT, as the kernel's IB_CM_REP_ERROR, after 15 resends by its
# timer (more: each REQ that comes again is answered with it); the
# client's REQ ends the same way.  Without the resending the server's id
# waited in REP_SENT for ever (ucmatose's server hung to the deadline).
if want rdma_cm_rep_gave_up; then
	port=$((port + 1))
	timeout 60 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 \
		SOFTVERBS_CM_TIMEOUT_MS=1600 SOFTVERBS_CM_MAD_DROP=rep=1000 \
		$run ucmatose -p $port -c 1 >"$log/rg.s" 2>&1 &
	spid=$!
	listening a $port
	timeout 30 ip netns exec "$tag-b" env SOFTVERBS_CM_TIMEOUT_MS=1600 \
		$run ucmatose -s $A -p $port -c 1 >"$log/rg.c" 2>&1
	rc=$?
	wait $spid 2>/dev/null
	src=$?
	resent=$(grep -c "MAD 0x0013 resent" "$log/rg.s")
	if [ $rc = 124 ] || [ $src = 124 ] || [ "$resent" -lt 15 ] ||
		! grep -q "MAD 0x0013 unanswered after 15 retries" "$log/rg.s" ||
		! grep -q "UNREACHABLE.*-110" "$log/rg.c" ||
		! grep -q "UNREACHABLE.*-110" "$log/rg.s"; then
		echo "FAIL rdma_cm_rep_gave_up: client $rc server $src," \
			"REPs resent $resent"
		grep -v "^softverbs" "$log/rg.c" | tail -5 | sed 's/^/  client: /'
		grep -v "^softverbs" "$log/rg.s" | tail -5 | sed 's/^/  server: /'
		failed=1
	else
		echo "ok   rdma_cm_rep_gave_up: $resent REPs resent (15 by" \
			"the timer, the rest answering REQs again), both ends" \
			"UNREACHABLE -ETIMEDOUT"
	fi
fi

# Hostile MADs (issue 26 item 3): a plain UDP socket in b sends rping's
# listener in a every kind of bad MAD (not RoCE, short, another class and
# version, a response, no such attribute, LAP, a REQ naming QP1, an RTU
# and a DREQ for comm IDs nobody has, a REQ whose rdma_cm header lies
# about its source, a SIDR REQ whose header lies, one for the TCP port
# space, a SIDR REP nobody asked for) and 500 REQs for a port nobody listens on; each is
# dropped with its reason (SOFTVERBS_DEBUG=1 says it; of the flood, what
# the socket's buffer held: at least 50), and a real rping from b
# connects after, every ping validated.
if want rdma_cm_hostile; then
	port=$((port + 1))
	timeout 120 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 $run \
		rping -s -a $A -p $port -C 10 >"$log/hm.s" 2>&1 &
	spid=$!
	listening a $port
	ip netns exec "$tag-b" "$build/tests/cm_probe" hostile 10.77.0.2 $A \
		$port >"$log/hm.p" 2>&1
	prc=$?
	timeout 60 ip netns exec "$tag-b" $run rping -c -a $A -p $port -v -V \
		-C 10 >"$log/hm.c" 2>&1
	rc=$?
	wait $spid 2>/dev/null
	src=$?
	miss=""
	for r in "not a GSI MAD" cm_mad_drop_len cm_mad_drop_class \
		cm_mad_drop_version cm_mad_drop_method cm_mad_drop_attr \
		cm_mad_drop_unsupported cm_mad_drop_field "at the listener" \
		"not this listener" "SIDR REQ whose service or addresses" \
		"MAD 0x0018 at the listener"; do
		grep -q "$r" "$log/hm.s" || miss="$miss [$r]"
	done
	n=$(grep -c "not this listener" "$log/hm.s")
	if [ $prc != 0 ] || [ $rc != 0 ] || [ $src != 0 ] || [ -n "$miss" ] ||
		[ "$n" -lt 50 ] || ! grep -q "rdma-ping-9:" "$log/hm.c"; then
		echo "FAIL rdma_cm_hostile: probe $prc client $rc server $src," \
			"$n foreign REQs dropped, reasons missing:$miss"
		tail -5 "$log/hm.c" | sed 's/^/  client: /'
		grep -v "^softverbs\[" "$log/hm.s" | tail -5 | sed 's/^/  server: /'
		failed=1
	else
		echo "ok   rdma_cm_hostile: every bad MAD dropped with its" \
			"reason, $n foreign REQs, then rping -V connected"
	fi
fi

# An MRA (IBA 12.6.6): the kernel's rdma_cm sends one for every REQ its
# userspace listener has not accepted yet, asking 68.7 s.  cm_probe from
# b answers the listener's REP with an MRA asking 2.1 s: none of the REPs
# that SOFTVERBS_CM_TIMEOUT_MS=1600 resends every 100 ms may come in the
# next 1.5 s (before, every MRA was dropped as not ours and the REPs went
# on); then the probe's RTU, DREQ and DREP, and rping's server ends 0
if want rdma_cm_mra; then
	port=$((port + 1))
	timeout 120 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 \
		SOFTVERBS_CM_TIMEOUT_MS=1600 $run \
		rping -s -a $A -p $port -C 10 >"$log/mra.s" 2>&1 &
	spid=$!
	listening a $port
	ip netns exec "$tag-b" "$build/tests/cm_probe" mra 10.77.0.2 $A \
		$port 30 >"$log/mra.p" 2>&1
	prc=$?
	wait $spid 2>/dev/null
	src=$?
	again=$(sed -n 's/^REPs again during the MRA.s hold: //p' "$log/mra.p")
	if [ $prc != 0 ] || [ $src != 0 ] || [ "$again" != 0 ] ||
		! grep -q "MRA: our REP waits" "$log/mra.s"; then
		echo "FAIL rdma_cm_mra: probe $prc, server $src, REPs again" \
			"in the hold: [$again]"
		tail -8 "$log/mra.p" | sed 's/^/  probe: /'
		grep -v "^softverbs\[" "$log/mra.s" | tail -5 | sed 's/^/  server: /'
		failed=1
	else
		echo "ok   rdma_cm_mra: no REP again in the MRA's 1.5 s;" \
			"RTU, DREQ, DREP after it"
	fi
	# the active side: our rping client's REQ held by the probe's MRA
	# (no REQ again in 1.5 s, SOFTVERBS_CM_TIMEOUT_MS=1600 resending
	# every 100 ms), then rejected: the client fails at once
	ip netns exec "$tag-a" "$build/tests/cm_probe" mra-req $A 10.77.0.2 \
		0 30 >"$log/mrq.p" 2>&1 &
	ppid=$!
	t=0 # the probe's socket at A:4791
	until ip netns exec "$tag-a" ss -Hlun "sport = :4791" | grep -q . ||
		[ $t -ge 100 ]; do
		t=$((t + 1))
		sleep 0.1 # another namespace's sockets: no event says
	done
	timeout 30 ip netns exec "$tag-b" env SOFTVERBS_DEBUG=1 \
		SOFTVERBS_CM_TIMEOUT_MS=1600 $run \
		rping -c -a $A -p $port -C 1 >"$log/mrq.c" 2>&1
	rc=$?
	wait $ppid
	prc=$?
	again=$(sed -n 's/^REQs again during the MRA.s hold: //p' "$log/mrq.p")
	if [ $prc != 0 ] || [ $rc = 0 ] || [ $rc = 124 ] ||
		[ "$again" != 0 ] ||
		! grep -q "MRA: our REQ waits" "$log/mrq.c"; then
		echo "FAIL rdma_cm_mra_req: probe $prc, client $rc, REQs again" \
			"in the hold: [$again]"
		tail -6 "$log/mrq.p" | sed 's/^/  probe: /'
		grep -v "^softverbs\[" "$log/mrq.c" | tail -5 | sed 's/^/  client: /'
		failed=1
	else
		echo "ok   rdma_cm_mra_req: no REQ again in the MRA's 1.5 s;" \
			"the REJ ended the client ($rc)"
	fi
fi

# SIDR over RoCE (issue 26 item 3): Debian's udaddy (UD, RDMA_PS_UDP,
# its fixed port 7174), whose rdma_connect sends a SIDR REQ to the
# listener's QP1 (MAD 0x0017) and whose listener answers a SIDR REP
# (0x0018) with its QPN and Q_Key: the client's ESTABLISHED carries them
# (udaddy makes its AH from it), the server's CONNECT_REQUEST is UD; then
# 10 messages each way over RoCE UD (the server answers from each wc's
# GRH: ibv_create_ah_from_wc).  The messages reach the server's QP while
# it listens: its IB CM socket, which outranks the UD door, passes them
# on (rdmacm/ib_door.c; without it udaddy's server never gets one).
# sidr_run NAME CLIENT_ENV SERVER_ENV CONNECTIONS MESSAGES: both must end
# 0 ("return status 0"; with CONNECTIONS 2 the server waits for a
# second client and is ended), with MESSAGES both say "data transfers
# complete", the client must have sent the SIDR REQ and the server the
# SIDR REP (SOFTVERBS_DEBUG=1 logs each MAD): before SIDR over RoCE a UD
# id took the TCP rendezvous and no MAD was sent.
sidr_run() {
	n=$1
	# shellcheck disable=SC2086 # $3 and $run are word lists
	timeout 60 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 $3 $run \
		udaddy -b $A -c "$4" -C "$5" >"$log/$n.s" 2>&1 &
	spid=$!
	listening a 7174 # the UD listener's ports are bound by then
	# shellcheck disable=SC2086 # $2 and $run are word lists
	timeout 60 ip netns exec "$tag-${sidr_ns:-b}" env SOFTVERBS_DEBUG=1 \
		$2 $run udaddy -s $A -C "$5" >"$log/$n.c" 2>&1
	rc=$?
	[ "$4" = 1 ] || kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	src=$?
	[ "$4" = 1 ] || src=0
	msgs=$5 data=1
	[ "$5" = 0 ] || { grep -q "data transfers complete" "$log/$n.c" &&
		grep -q "data transfers complete" "$log/$n.s"; } || data=0
	req=$(grep -c "MAD 0x0017 sent" "$log/$n.c")
	reqa=$(grep -c "MAD 0x0017 resent" "$log/$n.c")
	rep=$(grep -c "MAD 0x0018 sent" "$log/$n.s")
	repa=$(grep -c "MAD 0x0018 resent" "$log/$n.s")
	lost=$(grep -c "lost on purpose" "$log/$n.c" "$log/$n.s" |
		awk -F: '{s += $2} END {print s}')
}
sidr_check() { # NAME OK: says ok or FAIL
	if [ "$2" = 1 ] && [ $rc = 0 ] && [ $src = 0 ] && [ $data = 1 ] &&
		grep -q "return status 0" "$log/$1.c" &&
		grep -q "RDMA_CM_EVENT_ESTABLISHED" "$log/$1.c" &&
		grep -q "RDMA_CM_EVENT_CONNECT_REQUEST" "$log/$1.s"; then
		echo "ok   $1: SIDR REQ sent $req (+$reqa again), SIDR REP" \
			"$rep (+$repa again), $lost lost on purpose," \
			"ESTABLISHED with the server's QPN and Q_Key," \
			"$msgs messages each way"
	else
		echo "FAIL $1: client rc $rc, server rc $src, data $data, SIDR REQ $req" \
			"(+$reqa), REP $rep (+$repa), lost $lost"
		grep -v "^softverbs\[" "$log/$1.c" | tail -6 | sed 's/^/  client: /'
		grep -v "^softverbs\[" "$log/$1.s" | tail -6 | sed 's/^/  server: /'
		failed=1
	fi
}
if want rdma_cm_udaddy; then
	sidr_run rdma_cm_udaddy "" "" 1 10
	ok=0
	[ "$req" = 1 ] && [ "$reqa" = 0 ] && [ "$rep" = 1 ] && ok=1
	sidr_check rdma_cm_udaddy $ok
fi
# The same with the client's first SIDR REQ and the server's first SIDR
# REP lost on purpose (each try 300 ms): the REQ is resent by its timer,
# the REQ that comes again after the REP was sent is answered with the
# same REP again (not a second CONNECT_REQUEST: the server, waiting
# for 2, sees one; no messages: it waits), and udaddy's client completes.
if want rdma_cm_udaddy_loss; then
	sidr_run rdma_cm_udaddy_loss \
		"SOFTVERBS_CM_TIMEOUT_MS=4800 SOFTVERBS_CM_MAD_DROP=req=1" \
		"SOFTVERBS_CM_TIMEOUT_MS=4800 SOFTVERBS_CM_MAD_DROP=rep=1" 2 0
	ok=0
	[ "$reqa" -ge 2 ] && [ "$rep" = 1 ] && [ "$repa" -ge 1 ] &&
		[ "$lost" = 2 ] &&
		grep -q "SIDR REQ again.*its REP again" "$log/rdma_cm_udaddy_loss.s" &&
		[ "$(grep -c "queued RDMA_CM_EVENT_CONNECT_REQUEST" \
			"$log/rdma_cm_udaddy_loss.s")" = 1 ] && ok=1
	sidr_check rdma_cm_udaddy_loss $ok
fi
# A SIDR REQ for a UDP service nobody listens on (udaddy's 7174, while
# only rping listens in a): the listening process answers a SIDR REP
# "unsupported" (status 1, as the kernel's CM) since no socket there
# holds UDP port 7174, and udaddy ends RDMA_CM_EVENT_UNREACHABLE with
# status 1 at once (without it: after its 64 s of resends).
if want rdma_cm_sidr_unreachable; then
	port=$((port + 1))
	# shellcheck disable=SC2086 # $run is a command line
	timeout 60 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 $run \
		rping -s -a $A -p $port -C 1 >"$log/su.s" 2>&1 &
	spid=$!
	listening a $port
	# shellcheck disable=SC2086 # $run is a command line
	timeout 30 ip netns exec "$tag-b" $run udaddy -s $A -C 1 \
		>"$log/su.c" 2>&1
	rc=$?
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	if [ $rc = 0 ] || [ $rc = 124 ] ||
		! grep -q "UNREACHABLE, error: 1" "$log/su.c" ||
		! grep -q "nobody listens: unsupported" "$log/su.s"; then
		echo "FAIL rdma_cm_sidr_unreachable: udaddy rc $rc"
		tail -4 "$log/su.c" | sed 's/^/  client: /'
		grep -v "^softverbs\[" "$log/su.s" | tail -4 | sed 's/^/  server: /'
		failed=1
	else
		echo "ok   rdma_cm_sidr_unreachable: $(grep UNREACHABLE "$log/su.c" |
			head -1)"
	fi
fi

# Timewait (issue 26 item 3): the persistent rping server loses its first
# DREP on purpose (SOFTVERBS_CM_MAD_DROP=drep=1); the client's DREQ,
# resent after rping destroyed its id (every 125 ms), comes to a
# connection the server has closed, and the server's timewait answers it
# with the same DREP again, so the client's orphan DREQ is answered
# instead of running out its 15 tries.  Without timewait the resent
# DREQs are dropped ("no such id") and the client's log says it gave up.
if want rdma_cm_timewait; then
	port=$((port + 1))
	# shellcheck disable=SC2086 # $run is a command line
	timeout 60 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 \
		SOFTVERBS_CM_MAD_DROP=drep=1 \
		$run rping -s -P -a $A -p $port -C 10 >"$log/tw.s" 2>&1 &
	spid=$!
	listening a $port
	# shellcheck disable=SC2086 # $run is a command line
	timeout 30 ip netns exec "$tag-b" env SOFTVERBS_DEBUG=1 \
		$run rping -c -a $A -p $port -v -V -C 10 >"$log/tw.c" 2>&1
	rc=$?
	kill "$spid" 2>/dev/null
	wait $spid 2>/dev/null
	lost=$(grep -c "MAD 0x0016 sent: lost on purpose" "$log/tw.s")
	again=$(grep -c "timewait: a DREQ again" "$log/tw.s")
	if [ $rc != 0 ] || [ "$lost" != 1 ] || [ "$again" -lt 1 ] ||
		! grep -q "a destroyed id's DREQ answered" "$log/tw.c" ||
		grep -q "unanswered\|gave up" "$log/tw.c"; then
		echo "FAIL rdma_cm_timewait: client $rc, DREP lost $lost," \
			"DREQs answered in timewait $again"
		grep -v "^softverbs\[" "$log/tw.c" | tail -4 | sed 's/^/  client: /'
		grep -v "^softverbs\[" "$log/tw.s" | tail -4 | sed 's/^/  server: /'
		failed=1
	else
		echo "ok   rdma_cm_timewait: the first DREP lost, $again DREQ(s)" \
			"again answered from timewait, the client's DREQ answered"
	fi
fi

# A SIDR REQ is a first REQ too: with three other listeners (ucmatose)
# on a's address in the reuseport group, udaddy's REQs from b and from c
# (two 4-tuples, two hashes) reach its server by being passed on by its
# service (RDMA_PS_UDP, 7174); before, the member the hash picked dropped
# it (the port is held on the host: not "unsupported") and the client
# ended UNREACHABLE (SOFTVERBS_CM_TIMEOUT_MS=8000 here).
if want rdma_cm_udaddy_others; then
	others=""
	for k in 1 2 3; do
		port=$((port + 1))
		# shellcheck disable=SC2086 # $run is a command line
		timeout 120 ip netns exec "$tag-a" $run ucmatose -b $A -p $port \
			>"$log/uo.x$k" 2>&1 &
		others="$others $!"
		listening a $port
	done
	for sidr_ns in b c; do
		sidr_run "rdma_cm_udaddy_others_$sidr_ns" \
			SOFTVERBS_CM_TIMEOUT_MS=8000 "" 1 2
		sidr_check "rdma_cm_udaddy_others_$sidr_ns" 1
	done
	sidr_ns=b
	for p in $others; do
		kill "$p" 2>/dev/null
	done
	wait
fi

# The IB CM's lookups (issue 27 item 3): ucmatose makes 100 connections
# at once each way; every MAD found its id by an index (our comm ID, the
# peer's, the listener's service: rdmacm/ib_link.c), where it walked
# every live id (~50 per MAD at 100 connections; the listener, the
# oldest id, last of all).  SOFTVERBS_DEBUG's exit line of each side
# says how many MADs were routed and ids looked at: at most 2 per MAD;
# and the resend walks' ids visited (those with a MAD kept), said.
# lookups_ok ROUTED LOOKED WALKS VISITED: at least 100 MADs, 2 ids each
lookups_ok() {
	[ $# = 4 ] && [ "$1" -ge 100 ] && [ "$2" -le $(($1 * 2)) ]
}
if want rdma_cm_lookups; then
	port=$((port + 1))
	# shellcheck disable=SC2086 # $run is a command line
	timeout 120 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 \
		$run ucmatose -p $port -c 100 >"$log/lk.s" 2>&1 &
	spid=$!
	listening a $port
	# shellcheck disable=SC2086 # $run is a command line
	timeout 100 ip netns exec "$tag-b" env SOFTVERBS_DEBUG=1 \
		$run ucmatose -s $A -p $port -c 100 >"$log/lk.c" 2>&1
	rc=$?
	wait $spid 2>/dev/null
	src=$?
	ok=1
	said=""
	for f in lk.s lk.c; do
		l=$(grep -o "IB CM: [0-9]* MADs routed, [0-9]* ids looked at; [0-9]* resend walks, [0-9]* ids visited" "$log/$f" | tail -1)
		# shellcheck disable=SC2046 # the four numbers, as words
		lookups_ok $(echo "$l" | tr -cs '0-9' ' ') || ok=0
		said="$said ${f#lk.}: [$l]"
	done
	if [ $rc != 0 ] || [ $src != 0 ] || [ $ok != 1 ] ||
		[ "$(grep -c "return status 0" "$log/lk.c")" -lt 1 ]; then
		echo "FAIL rdma_cm_lookups: client $rc server $src;$said"
		grep -v "^softverbs" "$log/lk.c" | tail -4 | sed 's/^/  client: /'
		grep -v "^softverbs" "$log/lk.s" | tail -4 | sed 's/^/  server: /'
		failed=1
	else
		echo "ok   rdma_cm_lookups: 100 connections each way;$said"
	fi
fi

# MADs the kernel gives the wrong process of the host (rdmacm/ib_pass.c):
# each process is its own IB CM, and the kernel picks which of the host's
# sockets on 4791 gets a datagram.  Two clients in b connect to one server
# address at once: both hold a socket connected to (a, 0xd872) on b's
# 4791, one 4-tuple, and the kernel gives every MAD of it to one of them.
# The other's REP, DREQ... are passed to it by the comm ID they name (its
# prefix's name); before, they were dropped as not ours (counted here
# from the clients' SOFTVERBS_DEBUG logs: none may be) and a client
# hung until the other had gone (here, often, its deadline).  5 rounds,
# both clients started together, so each order comes.
# stolen LOG1 LOG2: how many MADs each client dropped as "no such id"
# that named a comm ID the other sent its REQ with
stolen() {
	n=0
	for pair in "$1 $2" "$2 $1"; do
		# shellcheck disable=SC2086 # two file names
		set -- $pair
		# shellcheck disable=SC2013 # the IDs are words
		for id in $(sed -n 's/.*MAD 0x0010 sent (comm IDs \(0x[0-9a-f]*\).*/\1/p' "$1"); do
			k=$(grep -c "for comm ID $id: no such id: dropped" "$2")
			n=$((n + k))
		done
	done
	echo $n
}
if want rdma_cm_two_clients; then
	ok=1
	said=""
	for r in 1 2 3 4 5; do
		port=$((port + 1))
		# shellcheck disable=SC2086 # $run is a command line
		timeout 40 ip netns exec "$tag-a" $run ucmatose -p $port -c 2 \
			>"$log/tc.s$r" 2>&1 &
		spid=$!
		listening a $port
		# shellcheck disable=SC2086 # $run is a command line
		timeout 30 ip netns exec "$tag-b" env SOFTVERBS_DEBUG=1 \
			$run ucmatose -s $A -p $port -c 1 >"$log/tc.c$r.1" 2>&1 &
		c1=$!
		# shellcheck disable=SC2086 # $run is a command line
		timeout 30 ip netns exec "$tag-b" env SOFTVERBS_DEBUG=1 \
			$run ucmatose -s $A -p $port -c 1 >"$log/tc.c$r.2" 2>&1 &
		c2=$!
		wait "$c1"
		rc1=$?
		wait "$c2"
		rc2=$?
		wait "$spid"
		src=$?
		p1=$(grep -c "passed to the process that has it" "$log/tc.c$r.1")
		p2=$(grep -c "passed to the process that has it" "$log/tc.c$r.2")
		# the MADs one client dropped that named the other's comm ID
		# (it may still finish: once the other has gone, a resend
		# reaches it)
		lost=$(stolen "$log/tc.c$r.1" "$log/tc.c$r.2")
		said="$said [$rc1 $rc2 $src: passed $p1/$p2, lost $lost]"
		if [ $rc1 != 0 ] || [ $rc2 != 0 ] || [ $src != 0 ] ||
			[ "$lost" != 0 ] ||
			! grep -q "return status 0" "$log/tc.c$r.1" ||
			! grep -q "return status 0" "$log/tc.c$r.2"; then
			ok=0
		fi
	done
	if [ $ok != 1 ]; then
		echo "FAIL rdma_cm_two_clients: rounds (client, client," \
			"server: MADs passed by each client):$said"
		grep -hv "^softverbs" "$log/tc.c5.1" "$log/tc.c5.2" | tail -4 |
			sed 's/^/  client: /'
		failed=1
	else
		echo "ok   rdma_cm_two_clients: 5 rounds of two clients at once," \
			"all connected; (client, client, server: passed):$said"
	fi
fi

# A peer's first REQ is unconnected: the kernel gives it to one member of
# the reuseport group on a's 4791 by the hash of its 4-tuple (b's or c's
# address and 0xd872: the same member every time).  Here three other
# processes listen on a's address (ucmatose on other ports) and one has a
# UD QP (its UD door) before the server does; 6 connections, from b and
# from c, each to a new server (ucmatose -c 1).  The member that gets
# the REQ passes it to the listening process by its service (port space,
# port, address); before, another listener dropped it as not its service
# and the client never connected (rxe's resends hash the same way).
if want rdma_cm_first_req; then
	others=""
	for k in 1 2 3; do
		port=$((port + 1))
		# shellcheck disable=SC2086 # $run is a command line
		timeout 300 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 $run \
			ucmatose -b $A -p $port >"$log/fr.x$k" 2>&1 &
		others="$others $!"
		listening a $port
	done
	port=$((port + 1))
	# shellcheck disable=SC2086 # $run is a command line
	timeout 300 ip netns exec "$tag-a" $run ibv_ud_pingpong $SV -g "$ga" \
		-p $port >"$log/fr.ud" 2>&1 &
	others="$others $!"
	listening a $port
	n=0
	said=""
	for i in 1 2 3 4 5 6; do
		ns=b
		[ $((i % 2)) = 0 ] && ns=c
		port=$((port + 1))
		# shellcheck disable=SC2086 # $run is a command line
		timeout 30 ip netns exec "$tag-a" $run ucmatose -b $A -p $port \
			-c 1 >"$log/fr.s$i" 2>&1 &
		spid=$!
		listening a $port
		# shellcheck disable=SC2086 # $run is a command line
		timeout 20 ip netns exec "$tag-$ns" $run ucmatose -s $A \
			-p $port -c 1 >"$log/fr.c$i" 2>&1
		rc=$?
		wait $spid
		src=$?
		said="$said $ns:$rc/$src"
		[ $rc = 0 ] && [ $src = 0 ] &&
			grep -q "return status 0" "$log/fr.c$i" && n=$((n + 1))
	done
	for p in $others; do
		kill "$p" 2>/dev/null
	done
	wait
	passed=$(cat "$log"/fr.x* | grep -c "passed to the process that has it")
	if [ $n != 6 ]; then
		echo "FAIL rdma_cm_first_req: $n of 6 connected (client/server" \
			"rc:$said); REQs passed by the other listeners: $passed"
		grep -hv "^softverbs" "$log/fr.x1" | tail -3 | sed 's/^/  other: /'
		failed=1
	else
		echo "ok   rdma_cm_first_req: 6 of 6 connected beside 3 other" \
			"listeners and a UD door; REQs they passed on: $passed"
	fi
fi

# The UD door's part: in a, the only member on 4791 is a UD QP's door
# (ibv_ud_pingpong waiting for its peer), and the listener is the probe,
# which holds only a listener's name (softverbs/cm/svc/...).  A REQ from
# b to a:4791 reaches the door, which passes it by its service: the
# probe checks the header and that the datagram is the REQ as sent.
# Before, the door dropped QP1's datagrams.
if want rdma_cm_door_req; then
	port=$((port + 1))
	# shellcheck disable=SC2086 # $run is a command line
	timeout 60 ip netns exec "$tag-a" $run ibv_ud_pingpong $SV -g "$ga" \
		-p $port >"$log/dr.ud" 2>&1 &
	udp=$!
	listening a $port
	port=$((port + 1))
	probe="$(dirname "$0")/cm_pass_probe.py"
	timeout 20 ip netns exec "$tag-a" /usr/bin/python3 "$probe" \
		door_listen $port $A "$log/dr.ready" >"$log/dr.l" 2>&1 &
	lpid=$!
	wait_file "$log/dr.ready" 10
	ip netns exec "$tag-b" /usr/bin/python3 "$probe" door_send $port $A \
		>"$log/dr.s" 2>&1
	wait $lpid
	lrc=$?
	kill $udp 2>/dev/null
	wait $udp 2>/dev/null
	if [ $lrc != 0 ]; then
		echo "FAIL rdma_cm_door_req: the REQ at the UD door was not" \
			"passed to the listener's name (probe $lrc)"
		cat "$log/dr.l" "$log/dr.s" | sed 's/^/  probe: /'
		failed=1
	else
		echo "ok   rdma_cm_door_req: $(cat "$log/dr.l")"
	fi
fi

# The hostile side of passing: tests/roce/cm_pass_probe.py, in a, sends
# to the listening rping's service name what another process of the host
# might: a well-formed passed REQ from another user (nobody: dropped as
# not our user, whatever it says), headers that are short, of another
# magic, length or key, one whose MAD is bad (its checks say why), and a
# flood of 20000 (sent MSG_DONTWAIT: the kernel's queue bounds what we
# hold; each is read and dropped).  Then a real rping from b connects.
# pass_ctrs PID: the IB CM's passing counters of process PID in a
pass_ctrs() {
	ip netns exec "$tag-a" "$build/bin/softverbs-stat" --json "$1" |
		python3 -c 'import json,sys
t=json.loads(sys.stdin.read())
cs=t if isinstance(t,list) else t["contexts"]
for c in cs:
	if "cm_mad_sent" in c["total"]:
		print(" ".join("%s=%d" % (k, c["total"][k]) for k in sys.argv[1:]))' \
			cm_mad_drop_pass cm_mad_pass_recv 2>&1
}
if want rdma_cm_pass_hostile; then
	port=$((port + 1))
	# shellcheck disable=SC2086 # $run is a command line
	timeout 120 ip netns exec "$tag-a" env SOFTVERBS_DEBUG=1 $run \
		rping -s -a $A -p $port -C 10 >"$log/ph.s" 2>&1 &
	spid=$!
	listening a $port
	probe="$(dirname "$0")/cm_pass_probe.py"
	# another user must be able to read the probe: a tree under a
	# directory only we may enter (a clone in mktemp -d's) is not, and
	# that part is then skipped, said, not failed for nothing counted
	ou=10 other=""
	if ! setpriv --reuid=65534 --regid=65534 --clear-groups \
		test -r "$probe"; then
		ou=0
		other=" (another user's part skipped: UID 65534 cannot read $probe)"
	fi
	urc=0
	if [ $ou != 0 ]; then
		ip netns exec "$tag-a" setpriv --reuid=65534 --regid=65534 \
			--clear-groups /usr/bin/python3 "$probe" other_user \
			$port $A >"$log/ph.u" 2>&1
		urc=$?
	else
		: >"$log/ph.u"
	fi
	ip netns exec "$tag-a" /usr/bin/python3 "$probe" malformed $port $A \
		>"$log/ph.m" 2>&1
	mrc=$?
	ip netns exec "$tag-a" /usr/bin/python3 "$probe" flood $port $A \
		>"$log/ph.f" 2>&1
	frc=$?
	sent=$(sed -n 's/^flood: \([0-9]*\) sent.*/\1/p' "$log/ph.f")
	# its counters: every one of them dropped as passed, but the two
	# whose header agrees (their MADs' checks drop them): 10 from
	# nobody, 8 malformed headers, the flood's; until they are read
	# (10 s at most)
	want_ctrs="cm_mad_drop_pass=$((ou + 8 + ${sent:-0})) cm_mad_pass_recv=2"
	rp=$(pid_in a rping)
	t=0
	until [ "$(pass_ctrs "$rp")" = "$want_ctrs" ] || [ $t -ge 100 ]; do
		t=$((t + 1))
		sleep 0.1 # polling another process's counters, under a deadline
	done
	ctrs=$(pass_ctrs "$rp")
	# shellcheck disable=SC2086 # $run is a command line
	timeout 60 ip netns exec "$tag-b" $run rping -c -a $A -p $port -v -V \
		-C 10 >"$log/ph.c" 2>&1
	rc=$?
	wait $spid
	src=$?
	nu=$(grep -c "the sender is not our user" "$log/ph.s")
	miss=""
	for r in "not a passed MAD" "a malformed header" \
		"not a CM MAD that names its owner" "not this listener's service" \
		"cm_mad_drop_field\|cm_mad_drop_len\|MAD dropped"; do
		grep -q "passed to us by another process: $r\|$r" "$log/ph.s" ||
			miss="$miss [$r]"
	done
	nd=$(grep -c "passed to us by another process" "$log/ph.s")
	if [ $urc != 0 ] || [ $mrc != 0 ] || [ $frc != 0 ] || [ $rc != 0 ] ||
		[ "$ctrs" != "$want_ctrs" ] ||
		[ $src != 0 ] || { [ $ou != 0 ] && [ "$nu" -lt 1 ]; } ||
		[ -n "$miss" ] ||
		[ "$nd" -lt "${sent:-1}" ] ||
		! grep -q "rdma-ping-9:" "$log/ph.c"; then
		echo "FAIL rdma_cm_pass_hostile: probes $urc $mrc $frc, client" \
			"$rc, server $src; $nu from another user, $nd dropped" \
			"of $sent flooded; counters [$ctrs], not [$want_ctrs];" \
			"reasons missing:$miss"
		cat "$log/ph.u" "$log/ph.m" "$log/ph.f" | tail -4 | sed 's/^/  probe: /'
		grep -v "^softverbs\[" "$log/ph.s" | tail -4 | sed 's/^/  server: /'
		failed=1
	else
		echo "ok   rdma_cm_pass_hostile: $nu passed REQ(s) from another" \
			"user dropped, each malformed kind dropped with its reason," \
			"$nd in all ($(cat "$log/ph.f"); $ctrs), then rping -V" \
			"connected$other"
	fi
fi

# acks_of NS MIN PROG ARGS...: PROG ARGS runs as server in a and client
# in b (endless) on $port; once PROG in NS sent MIN ACKs (30 s at most),
# prints its softverbs-stat "roce_acks roce_acks_joined", and both end.
# (In $(...): the caller moves port on.)
acks_of() {
	ns=$1 min=$2
	shift 2
	# shellcheck disable=SC2086
	timeout 60 ip netns exec "$tag-a" $run "$@" -x "$ga" -p $port \
		>"$log/aj.s" 2>&1 &
	ajs=$!
	listening a "$port"
	# shellcheck disable=SC2086
	timeout 60 ip netns exec "$tag-b" $run "$@" -x "$gb" -p $port $A \
		>"$log/aj.c" 2>&1 &
	ajc=$!
	t=0
	seen=""
	while [ $t -lt 300 ]; do
		rp=$(pid_in "$ns" "$1")
		[ -n "$rp" ] &&
			seen=$(ip netns exec "$tag-$ns" "$build/bin/softverbs-stat" --json "$rp" 2>/dev/null |
				python3 -c 'import json,sys
t=json.loads(sys.stdin.read())
t=t[0]["total"] if isinstance(t,list) else t["contexts"][0]["total"]
print(t["roce_acks"], t["roce_acks_joined"])' 2>/dev/null)
		[ -n "$seen" ] && [ "${seen% *}" -ge "$min" ] && break
		t=$((t + 1))
		sleep 0.1 # the table is refreshed every 250 ms
	done
	kill "$ajc" "$ajs" 2>/dev/null
	wait "$ajc" "$ajs" 2>/dev/null
	echo "$seen"
}

# ack_join: in a ping-pong (ib_send_lat 8 B) the responder's ACK waits
# for the reply the app posts at once and leaves in its system call
# (roce/out.c ack_waits; softverbs-stat roce_acks_joined).  Read from
# the running client once it sent 2,000 ACKs: at least one in ten joined
# (0 without the wait; all but one or two here, fewer when the two share
# a CPU; the wait's first look is test_roce_gso's).
# ack_join_stream: a stream's receiver (ib_send_bw's server) never
# replies: its ACKs wait and go alone, none counted joined.
if want ack_join && command -v ib_send_lat >/dev/null; then
	port=$((port + 1))
	seen=$(acks_of b 2000 ib_send_lat $SV -m 1024 -s 8 -n 1000000)
	acks=${seen% *}
	joined=${seen#* }
	if [ -z "$seen" ] || [ "${acks:-0}" -lt 2000 ] ||
		[ $((joined * 10)) -lt "$acks" ]; then
		echo "FAIL ack_join: ACKs sent, joined: '$seen' (want 2000 or more, a tenth joined)"
		tail -n 3 "$log/aj.c" "$log/aj.s"
		failed=1
	else
		echo "ok   ack_join: $joined of $acks ACKs left with the app's reply"
	fi
	port=$((port + 1))
	seen=$(acks_of a 200 ib_send_bw $SV -m 1024 -s 65536 -n 1000000)
	if [ -z "$seen" ] || [ "${seen% *}" -lt 200 ] || [ "${seen#* }" != 0 ]; then
		echo "FAIL ack_join_stream: the receiver's ACKs sent, joined: '$seen' (want 200 or more, none joined)"
		tail -n 3 "$log/aj.c" "$log/aj.s"
		failed=1
	else
		echo "ok   ack_join_stream: ${seen% *} ACKs of a stream's receiver, none joined"
	fi
fi

# The capture: on a's veth, while a pingpong, a read and an atomic run.
if ! command -v tshark >/dev/null; then
	echo "note: no tshark: the capture check skipped"
elif ! want capture; then
	echo "note: the capture not in SV_ROCE_ROWS"
else
	cap=$log/roce.pcap
	cap_start "$cap"
	pair cap_rc_pingpong 60 "iters in" a b \
		ibv_rc_pingpong $SV -g "$ga" -p @P -s 3001 -n 20 -c -- \
		ibv_rc_pingpong $SV -g "$gb" -p @P -s 3001 -n 20 -c $A
	pair cap_uc_pingpong 60 "iters in" a b \
		ibv_uc_pingpong $SV -g "$ga" -p @P -s 2500 -n 20 -c -- \
		ibv_uc_pingpong $SV -g "$gb" -p @P -s 2500 -n 20 -c $A
	if command -v ib_read_lat >/dev/null; then
		pair cap_ib_read_lat 60 "^ 2050 " a b \
			ib_read_lat $SV -x "$ga" -m 1024 -p @P -s 2050 -n 20 -- \
			ib_read_lat $SV -x "$gb" -m 1024 -p @P -s 2050 -n 20 $A
		pair cap_ib_atomic_lat 60 "^ 8 " a b \
			ib_atomic_lat $SV -x "$ga" -m 1024 -p @P -n 20 -- \
			ib_atomic_lat $SV -x "$gb" -m 1024 -p @P -n 20 $A
	fi
	# SOFTVERBS_FAULTS reorder_out on both ends: a flush where a
	# datagram moved leaves one datagram a message, each ICRC made for
	# IP ID 0; one moved inside a GSO run would go with another's ID
	# and be refused below (20000 bytes: runs of 20 packets)
	export SOFTVERBS_FAULTS=reorder_out=0.2,seed=5
	pair cap_reorder_out 60 "iters in" a b \
		ibv_rc_pingpong $SV -g "$ga" -p @P -s 20000 -n 20 -c -- \
		ibv_rc_pingpong $SV -g "$gb" -p @P -s 20000 -n 20 -c $A
	unset SOFTVERBS_FAULTS
	cap_stop
	"$build/tests/roce_gen" parse "$cap" >"$log/verdicts" ||
		{ echo "FAIL roce_gen parse"; failed=1; }
	# the pingpong's 3001 bytes are three packets: runs of three, IDs
	# 0, 1 and 2 (one ID more at least shows the kernel counted them)
	if ! ids=$(tshark -n -r "$cap" -T fields -e ip.id 2>/dev/null | sort -u | tr '\n' ' '); then
		echo "FAIL: tshark cannot read the capture's IP IDs"
		failed=1
	elif [ "${SOFTVERBS_ROCE_GSO:-1}" = 1 ]; then
		case " $ids" in
		*" 0x0001 "*0x0002*) echo "ok   GSO runs cut with IP IDs: $ids" ;;
		*)
			echo "FAIL: no IP IDs 1 and 2 captured (no GSO run?): $ids"
			failed=1
			;;
		esac
	fi
	n=$(wc -l <"$log/verdicts")
	bad=$(grep -vc '^ok ' "$log/verdicts")
	ops=$(awk '{print $2}' "$log/verdicts" | sort -u | tr '\n' ' ')
	if [ "$n" -lt 80 ] || [ "$bad" != 0 ]; then
		echo "FAIL capture: $n packets, $bad refused:"
		sort "$log/verdicts" | awk '{print $1}' | uniq -c
		failed=1
	else
		echo "ok   capture: $n packets, every ICRC checked; opcodes $ops"
	fi
	# the payloads are test bytes: tshark's guesses of what they carry
	# (RPC over RDMA, EoIB...) off, as roce_wire.py does
	guess=$(tshark -G heuristic-decodes 2>/dev/null | awk -F'\t' '
		$1 == "infiniband.payload" && $2 == "ethertype" { print "--disable-heuristic eth_over_ib"; next }
		$1 == "infiniband.payload" { print "--disable-protocol " $2 }')
	# shellcheck disable=SC2086
	# (UDP checksums unchecked: a veth leaves them to an offload that
	# never runs, so a capture shows what the stack left in them)
	tshark -n -r "$cap" $guess -o ip.check_checksum:TRUE -T fields -E separator=\| \
		-e infiniband.bth.opcode -e _ws.malformed \
		-e _ws.expert.severity -e _ws.expert.message >"$log/ts" 2>&1
	tn=$(grep -c '^[0-9]' "$log/ts")
	# expert severity: 6291456 a warning, 8388608 an error
	tbad=$(awk -F'|' '/^[0-9]/ && ($2 != "" || $3 >= 6291456)' "$log/ts" | wc -l)
	if [ "$tn" != "$n" ] || [ "$tbad" != 0 ]; then
		echo "FAIL tshark: $tn of $n packets decoded as InfiniBand, $tbad bad"
		head -5 "$log/ts"
		failed=1
	else
		echo "ok   tshark: all $tn packets RoCE, none malformed"
	fi
	# the UC pingpong's packets: UC opcodes (0x20-0x3f), decoded so
	uc=$(awk -F'|' '/^[0-9]/ && $1 >= 32 && $1 < 64 { print $1 }' \
		"$log/ts" | sort -un | tr '\n' ' ')
	case "$uc" in
	*32*33*34*) echo "ok   UC opcodes decoded by tshark: $uc" ;;
	*)
		echo "FAIL: no UC SEND FIRST/MIDDLE/LAST (32-34) captured: $uc"
		failed=1
		;;
	esac
fi
[ $failed = 0 ] && echo "PASS"
exit $failed
