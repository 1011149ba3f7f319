#!/bin/bash
# Small one-sided operations, two builds alternated, then UCX over shared
# memory (post-direct-ab-2026-12-07.txt):
#   OLD=<build dir of the base> [NEW=build] [R=8] [P0=20000] post-direct-ab.sh
# perftest rows: t_typical (ib_write_lat: one way) in µs, ib_read_bw 4 KiB
# in MB/s; server on CPU 1, client on CPU 0.  ucx rows: ucx_perftest
# (UCX_TLS=posix,self) p50 in µs and its bandwidth column.
p=${P0:-20000}
pt() { # build tool port args...: the client's last result line
	local b=$1 t=$2 port=$3
	shift 3
	taskset -c 1 "$b/bin/softverbs-run" "$t" -d softverbs0 -p "$port" "$@" \
		>/dev/null 2>&1 &
	sleep 0.3
	taskset -c 0 "$b/bin/softverbs-run" "$t" -d softverbs0 -p "$port" "$@" \
		127.0.0.1 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ ' | tail -1
	wait
}
ucx() { # test size [iters]
	p=$((p + 1))
	UCX_TLS=posix,self taskset -c 1 ucx_perftest -p $p -c 1 >/dev/null 2>&1 &
	sleep 0.4
	UCX_TLS=posix,self ucx_perftest 127.0.0.1 -p $p -c 0 -t "$1" -s "$2" \
		-n "${3:-300000}" -w 10000 2>&1 | awk '/Final/{print $3, $6}'
	wait
}
for r in $(seq 1 "${R:-8}"); do
	for B in "${OLD:?build dir of the base}" "${NEW:-build}"; do
		p=$((p + 6))
		wl=$(pt "$B" ib_write_lat $p -s 8 -n 300000 | awk '{print $5}')
		rl=$(pt "$B" ib_read_lat $((p + 1)) -s 8 -n 300000 | awk '{print $5}')
		al=$(pt "$B" ib_atomic_lat $((p + 2)) -A FETCH_AND_ADD -n 300000 |
			awk '{print $5}')
		rb=$(pt "$B" ib_read_bw $((p + 3)) -s 4096 -n 1000000 -F |
			awk '{print $4}')
		echo "$r $B wl $wl rl $rl al $al rbw4k $rb"
	done
	echo "$r ucx put $(ucx ucp_put_lat 8) get $(ucx ucp_get 8) fadd" \
		"$(ucx ucp_fadd 8) get4k $(ucx ucp_get 4096 1000000)"
done
