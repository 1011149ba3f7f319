#!/bin/sh
# LIDs that route between hosts (issue 29 item 1, SOFTVERBS_SUBNET): with
# SOFTVERBS_SUBNET=10.77.0.0/24 across the netns suite's namespaces, each
# host's LID is the host part of its veth address (a: 1, b: 2, c: 3), and
# Debian's programs and perftest connect with LIDs alone: ibv_rc_pingpong
# without -g, ibv_ud_pingpong without -g, ib_send_lat and ib_read_bw
# without -x, UCX's rc_verbs and ud_verbs with no GID settings, Open MPI
# over UCX with ranks in two namespaces (rsh_agent.sh), and two
# processes of one host still meet over shared memory.  Without the variable, a LID of another host is refused as
# before.  A bad value refuses softverbs0 with one clear line.  A LID of
# the subnet with no host behind it fails an RC send with
# IBV_WC_RETRY_EXC_ERR within the retry budget (no hang), a UD send to
# it is lost (success, as on a fabric); a LID no host of the subnet can
# have is refused (EINVAL).  docs/tcp.md ("LIDs between hosts") says
# what is promised.
#
# usage: netns_lid.sh BUILD_DIR
# Needs root and ip(8): otherwise it says why and exits 77 (ctest: skipped).
set -u
build=$1
run="$build/bin/softverbs-run"
rcpp="$build/bin/rc_pingpong"
probe="$build/tests/sv_lid_probe"
tag="svl$$"
failed=0
log=$(mktemp -d)

# shellcheck source=tests/netns/setup.sh disable=SC2154
. "$(dirname "$0")/setup.sh"
command -v ibv_rc_pingpong >/dev/null ||
	skip "needs ibv_rc_pingpong (ibverbs-utils)"

A=10.77.0.1
SV="-d softverbs0"

fail() {
	echo "FAIL $*"
	failed=1
}

# Without SOFTVERBS_SUBNET: a LID is this host's only (the pair fails,
# and says why)
pair_fails() { # NAME WANT SERVER_NS CLIENT_NS (ibv_rc_pingpong, LIDs)
	port=$((port + 1))
	timeout 30 ip netns exec "$tag-$3" $run ibv_rc_pingpong $SV \
		-p "$port" >"$log/$1.s" 2>&1 &
	spid=$!
	listening "$3" "$port"
	timeout 30 ip netns exec "$tag-$4" $run ibv_rc_pingpong $SV \
		-p "$port" $A >"$log/$1.c" 2>&1
	rc=$?
	wait $spid
	if [ $rc -eq 0 ] || [ $rc -eq 124 ] ||
		! cat "$log/$1.s" "$log/$1.c" | grep -q "$2"; then
		fail "$1: client rc $rc, want a failure saying '$2'"
		sed 's/^/  /' "$log/$1.c" "$log/$1.s" | tail -10
	else
		echo "ok   $1: $(cat "$log/$1.s" "$log/$1.c" | grep "$2" | head -1)"
	fi
}
pair_fails no_subnet_refused "is not this host's" a b

export SOFTVERBS_SUBNET=10.77.0.0/24

# each host's LID is its address's host part
for h in a:1 b:2 c:3; do
	lid=$(in_ns "${h%:*}" ibv_devinfo -d softverbs0 | sed -n 's/.*port_lid:[^0-9]*//p')
	if [ "$lid" = "${h#*:}" ]; then
		echo "ok   lid_${h%:*}: port_lid $lid"
	else
		fail "lid_${h%:*}: port_lid '$lid', want ${h#*:}"
	fi
done

pair rc_pingpong_lid 60 "iters in" a b \
	ibv_rc_pingpong $SV -p @P -- \
	ibv_rc_pingpong $SV -p @P $A
pair rc_pingpong_lid_events 60 "iters in" a c \
	ibv_rc_pingpong $SV -p @P -e -- \
	ibv_rc_pingpong $SV -p @P -e $A
pair rc_pingpong_lid_1MiB 120 "iters in" b c \
	ibv_rc_pingpong $SV -p @P -s 1048576 -n 100 -- \
	ibv_rc_pingpong $SV -p @P -s 1048576 -n 100 10.77.0.2
pair our_rc_pingpong_lid 60 "iters in" a b \
	"$rcpp" $SV -p @P -- \
	"$rcpp" $SV -p @P $A
# datagrams to a LID: UDP to its address, no GRH
pair ud_pingpong_lid 60 "iters in" b c \
	ibv_ud_pingpong $SV -p @P -s 2048 -- \
	ibv_ud_pingpong $SV -p @P -s 2048 10.77.0.2
# one host: shared memory, as without the variable
pair rc_pingpong_lid_same_host 60 "iters in" a a \
	ibv_rc_pingpong $SV -p @P -- \
	ibv_rc_pingpong $SV -p @P 127.0.0.1
if command -v ib_send_lat >/dev/null; then
	pair ib_send_lat_lid 90 "^ 2 " a b \
		ib_send_lat $SV -p @P -n 1000 -- \
		ib_send_lat $SV -p @P -n 1000 $A
	pair ib_read_bw_lid 90 "65536 " b c \
		ib_read_bw $SV -p @P -n 1000 -- \
		ib_read_bw $SV -p @P -n 1000 10.77.0.2
fi
# UCX addresses IB ports by LID: rc_verbs (with ud_verbs for the
# wire-up) and ud_verbs alone, with no GID settings (issue 29)
if command -v ucx_perftest >/dev/null; then
	U="env UCX_NET_DEVICES=softverbs0:1"
	pair ucx_tag_lat_rc_verbs 120 "Final:" a b \
		$U UCX_TLS=rc_verbs,ud_verbs:aux ucx_perftest -p @P -t tag_lat \
		-n 1000 -- \
		$U UCX_TLS=rc_verbs,ud_verbs:aux ucx_perftest -p @P -t tag_lat \
		-n 1000 $A
	pair ucx_tag_lat_ud_verbs 120 "Final:" b c \
		$U UCX_TLS=ud_verbs ucx_perftest -p @P -t tag_lat -n 1000 -- \
		$U UCX_TLS=ud_verbs ucx_perftest -p @P -t tag_lat -n 1000 \
		10.77.0.2
	pair uct_put_lat_rc_verbs 120 "Final:" a c \
		ucx_perftest -p @P -d softverbs0:1 -x rc_verbs -t put_lat \
		-n 1000 -- \
		ucx_perftest -p @P -d softverbs0:1 -x rc_verbs -t put_lat \
		-n 1000 $A
fi
# Open MPI across two hosts over UCX, with no UCX or GID settings but the
# transports: mpirun in a, ranks in a and b (rsh_agent.sh)
mpipp="$build/tests/mpi_pingpong"
if command -v mpirun >/dev/null && [ -x "$mpipp" ]; then
	# each host's orted its own TMPDIR (rsh_agent.sh), as netns_mpi.sh
	# does: the namespaces share /tmp and the host name, and an orted
	# that fails to make its session directory under load left mpirun
	# unable to route to it (it died of SIGSEGV, rc 139, in a loaded run)
	export SV_NETNS_TAG="$tag" SV_RUN="$run" SV_NETNS_TMPDIR="$log/tmp"
	# shellcheck disable=SC2086 # $run may be several words (ASan)
	timeout 180 ip netns exec "$tag-a" $run mpirun --allow-run-as-root \
		-np 2 -H a,b --bind-to none \
		--mca plm_rsh_agent "$(dirname "$0")/rsh_agent.sh" \
		--mca oob_tcp_if_include 10.77.0.0/24 --mca pml ucx \
		-x SOFTVERBS_SUBNET -x UCX_TLS=rc_verbs,ud_verbs:aux \
		-x UCX_NET_DEVICES=softverbs0:1 "$mpipp" >"$log/mpi" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && grep -q "round trips" "$log/mpi"; then
		echo "ok   mpi_pingpong_ucx_lid: $(grep "round trips" "$log/mpi")"
	else
		fail "mpi_pingpong_ucx_lid: rc $rc"
		sed 's/^/  /' "$log/mpi" | tail -40
	fi
fi

# A bad value: one line naming it, and no softverbs0
bad() { # VALUE WANT
	out=$(SOFTVERBS_SUBNET=$1 in_ns a ibv_devinfo 2>&1)
	if echo "$out" | grep -q "SOFTVERBS_SUBNET=$1 is not valid: $2" &&
		echo "$out" | grep -q "refusing to open softverbs0" &&
		! echo "$out" | grep -q "hca_id"; then
		echo "ok   bad_subnet $1: $(echo "$out" | head -1)"
	else
		fail "bad_subnet $1: want 'is not valid: $2', no device"
		echo "$out" | sed 's/^/  /' | head -5
	fi
}
bad 10.77.0.0/8 "prefix '8' is not 16..30"
bad 10.77.0.1/24 "has host bits set (10.77.0.0/24?)"
bad 10.77.0/24 "'10.77.0' is not an IPv4 address"
bad 10.77.0.0 "is not an IPv4 subnet"
bad 10.77.0.0/24x "prefix '24x' is not 16..30"

# No address of this host in the subnet: a warning, the host's own LID
out=$(SOFTVERBS_SUBNET=10.99.0.0/24 in_ns a ibv_devinfo 2>&1)
if echo "$out" | grep -q "no address of this host is in it" &&
	echo "$out" | grep -q "port_lid"; then
	echo "ok   subnet_elsewhere: warned, the device opens"
else
	fail "subnet_elsewhere: want a warning and the device"
	echo "$out" | sed 's/^/  /' | head -5
fi

# probe NAME DEADLINE WANT KIND DLID [QPN]: sv_lid_probe's line in
# namespace a; took: its seconds (two decimals)
probe() {
	t0=$(date +%s.%N)
	out=$(timeout "$2" ip netns exec "$tag-a" $run "$probe" "$4" "$5" \
		${6:-} 2>&1)
	rc=$?
	took=$(echo "$t0 $(date +%s.%N)" | awk '{printf "%.2f", $2 - $1}')
	if [ $rc -eq 0 ] && echo "$out" | grep -q "$3"; then
		echo "ok   $1: $(echo "$out" | tail -1) ($took s)"
	else
		fail "$1: rc $rc, want '$3'"
		echo "$out" | sed 's/^/  /' | head -5
	fi
}
# 10.77.0.2: a host with no softverbs QP listening (refused: the QP's
# retries, ~4 s, and what starting a program costs at this load);
# 10.77.0.5: nobody answers ARP (~3 s more).  A call answered
# EHOSTUNREACH must not wait its 10 s as well: judged against the first,
# measured here, not against a fixed time a loaded machine outruns.
# LID 0x12c: past the /24's hosts
probe rc_no_listener 30 "status transport retry counter exceeded" rc 2
refused=$took
probe rc_no_host 30 "status transport retry counter exceeded" rc 5
if echo "$took $refused" | awk '{exit !($1 <= $2 + 6)}'; then
	echo "ok   rc_no_host_in_time: $took s, refused took $refused s (+6 s allowed)"
else
	fail "rc_no_host_in_time: $took s, more than the $refused s refused took + 6 s"
fi
probe rc_past_subnet 30 "rc: modify EINVAL" rc 0x12c
echo "$out" | grep -q "LID 0x012c names no host of SOFTVERBS_SUBNET=10.77.0.0/24" ||
	fail "rc_past_subnet_said: want the LID and the subnet named"
probe rc_lid_zero 30 "rc: modify EINVAL" rc 0
probe ud_no_host 30 "ud: status success" ud 5
probe ud_past_subnet 30 "ud: create_ah EINVAL" ud 0xc001

# A UD receive's slid is the sender's LID (b hears a, LID 1), as
# ibv_create_ah_from_wc needs to answer without a GRH
timeout 60 ip netns exec "$tag-b" $run "$probe" serve >"$log/serve" 2>&1 &
spid=$!
t=0
until grep -q "^qpn" "$log/serve" || [ $t -ge 200 ]; do
	t=$((t + 1))
	sleep 0.05 # the server's line, in a file
done
qpn=$(sed -n 's/^qpn //p' "$log/serve")
[ -n "$qpn" ] && probe ud_to_b 30 "ud: status success" ud 2 "$qpn"
wait $spid
if grep -q "^slid 0x0001 " "$log/serve"; then
	echo "ok   ud_slid: $(grep slid "$log/serve")"
else
	fail "ud_slid: want slid 0x0001 (a's LID)"
	sed 's/^/  /' "$log/serve"
fi

[ $failed -eq 0 ] && echo "netns.lid: all passed"
exit $failed
