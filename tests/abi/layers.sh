#!/bin/sh
# The layers of provider/ (DESIGN.md, "provider/"): calls go down, and the
# only calls up are the ones listed below.  Reads the objects of
# libibverbs.so.1 (OBJECT_DIR: the softverbs target's
# CMakeFiles/softverbs.dir) with nm, so what it checks is what links;
# inline functions of the headers are not seen.
#   layers.sh OBJECT_DIR
# A new call up fails here: make it go down, or add it to DESIGN.md's list
# and to `up` below, with its reason.
objs=$1

# layer of a file, in L: 0 ABI, 1 verbs objects, 2 engine, 3 transports,
# 4 progress; 9 services every layer may call (they call nothing above)
layer() {
	case $1 in
	abi/*) L=0 ;;
	device.c | context.c | mr.c | cq.c | channel.c | qp.c | srq.c | \
		xrc.c | ah.c | mcast.c) L=1 ;;
	post.c | req.c | resp.c | comp.c | opcode.c | qp_state.c) L=2 ;;
	shm.c | tcp.c | ud.c | lane.c | ring.c | rmem.c) L=3 ;;
	progress.c) L=4 ;;
	util.c | env.c | fault.c | faults.c | crc32c.c | pcap.c | stat.c | auth.c | \
		peer.c) L=9 ;;
	*) echo "layers.sh: $1 is in no layer: place it here and in DESIGN.md" >&2
	   L=-1 ;;
	esac
}

# The calls up: "<caller file> <symbol>"; * is any caller below.
up='
* sv_cq_push
* sv_async_event
* sv_qp_to_error
* sv_qp_flush
* sv_qp_flush_sq
progress.c sv_req_run
progress.c sv_resp_run
progress.c sv_comp_run
progress.c sv_qp_link_step
progress.c sv_qp_tcp_run
progress.c sv_xsrq_recv_run
progress.c sv_ud_recv_run
progress.c sv_ud_door_event
progress.c sv_ud_door_next_ns
progress.c sv_tcp_door_event
progress.c sv_tcp_door_next_ns
progress.c sv_tcp_next_ns
progress.c sv_tcp_run_begin
progress.c sv_tcp_run_end
progress.c sv_tcp_set_lazy
progress.c sv_tcp_quiet
progress.c sv_tcp_stalled
progress.c sv_tcp_owed
progress.c sv_lanes_rx_sleep
progress.c sv_qp_ack_timeout_ns
progress.c sv_shm_check
progress.c sv_shm_has_pending
progress.c sv_shm_next_ns
progress.c sv_link_set_sleep
progress.c sv_link_state_names
* sv_mr_lookup
resp.c sv_srq_take
resp.c sv_xrc_bind
resp.c sv_xrc_unbind
resp.c sv_xrc_fwd_data
resp.c sv_xrc_fwd_send
ud.c sv_mcast_attached
ud.c sv_mcast_members
ud.c sv_mcast_ctx_members
ud.c sv_mcast_ipv4
ud.c sv_gid_ipv4
ud.c sv_gid_sockaddr
ud.c sv_gid_is_local
ud.c sv_local_lid
ud.c sv_swqe_sge
comp.c ibv_wc_status_str
pcap.c sv_opcodes
'

cd "$objs" || exit 1
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
# Tables for one awk to join: one nm for all the objects, no process per
# object or symbol (a fork per undefined symbol, ~3,000 of them, took this
# test to its 60 s deadline on a loaded 2-CPU machine).
#   "L <file> <layer>", "P <caller> <symbol>" (the calls up), then nm -A:
#   "<file>.o:<address> <type> <symbol>", "<file>.o: U <symbol>"
n=0
for o in *.o abi/*.o; do
	[ -e "$o" ] || continue
	n=$((n + 1))
	layer "${o%.o}"
	echo "L ${o%.o} $L"
done >"$tmp"
if [ "$n" -lt 20 ]; then
	echo "layers.sh: only $n objects in $objs" >&2
	exit 1
fi
printf '%s\n' "$up" | awk 'NF == 2 { print "P", $1, $2 }' >>"$tmp"
nm -A *.o abi/*.o >>"$tmp" || exit 1

# read twice: every definition is known before the first use
awk -v n="$n" '
	$1 == "L" || $1 == "P" {
		if (FNR != NR)
			next
		if ($1 == "L")
			lay[$2] = $3
		else
			up[$2 " " $3] = 1
		if ($1 == "L" && $3 < 0)
			bad = 1
		next
	}
	NF == 3 {
		f = $1
		sub(/\.o:.*/, "", f)
		if (FNR == NR) {
			if ($2 ~ /^[A-TV-Z]$/ && !($3 in def))
				def[$3] = f # global, defined
			next
		}
		if ($2 != "U" && $2 != "w")
			next
		sym = $3; from = f; to = def[sym]
		if (to == "" || to == from)
			next
		if (lay[to] + 0 >= lay[from] + 0)
			next # down, sideways, a service
		if (("* " sym) in up || (from " " sym) in up)
			next
		printf "up-call not in the list: %s (layer %d) -> %s (%s, " \
		       "layer %d)\n", from, lay[from], sym, to, lay[to]
		bad = 1
	}
	END {
		if (!bad)
			print n " objects: every call up is a listed one"
		exit bad
	}' "$tmp" "$tmp"
