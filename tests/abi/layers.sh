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

# layer of a file: 0 ABI, 1 verbs objects, 2 engine, 3 transports,
# 4 progress; 9 services every layer may call (they call nothing above)
layer() {
	case $1 in
	abi/*) echo 0 ;;
	device.c | context.c | mr.c | cq.c | channel.c | qp.c | srq.c | \
		xrc.c | ah.c | mcast.c) echo 1 ;;
	post.c | req.c | resp.c | comp.c | opcode.c | qp_state.c) echo 2 ;;
	shm.c | tcp.c | ud.c | lane.c | ring.c | rmem.c) echo 3 ;;
	progress.c) echo 4 ;;
	util.c | env.c | fault.c | faults.c | crc32c.c | pcap.c | stat.c) echo 9 ;;
	*) echo "layers.sh: $1 is in no layer: place it here and in DESIGN.md" >&2
	   echo -1 ;;
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
defs=$(mktemp) || exit 1
trap 'rm -f "$defs"' EXIT
n=0
for o in *.o abi/*.o; do
	[ -e "$o" ] || continue
	n=$((n + 1))
	nm --defined-only -g "$o" |
		awk -v f="${o%.o}" 'NF == 3 { print $3, f }'
done >"$defs"
if [ "$n" -lt 20 ]; then
	echo "layers.sh: only $n objects in $objs" >&2
	exit 1
fi

bad=0
for o in *.o abi/*.o; do
	from=${o%.o}
	lf=$(layer "$from")
	[ "$lf" -ge 0 ] || bad=1
	for sym in $(nm -u "$o" | awk '{ print $2 }'); do
		to=$(awk -v s="$sym" '$1 == s { print $2; exit }' "$defs")
		[ -n "$to" ] && [ "$to" != "$from" ] || continue
		lt=$(layer "$to")
		[ "$lt" -ge "$lf" ] && continue # down, sideways, a service
		if printf '%s' "$up" | grep -qx "\(\*\|$from\) $sym"; then
			continue
		fi
		echo "up-call not in the list: $from (layer $lf) -> $sym ($to, layer $lt)"
		bad=1
	done
done
[ "$bad" -eq 0 ] && echo "$n objects: every call up is a listed one"
exit $bad
