#!/bin/sh
# Before/after of issue 27 item 5, alternated: each round runs every row
# with the "before" tree, then the "after" one, then UCX's peers, the
# client on CPU 1 and the server on CPU 0, with the load average beside
# each figure.  A tree is DIR/bin/softverbs-run + DIR/lib/libibverbs.so.1
# (a copy of a build's).  Usage: ab.sh BEFORE_DIR AFTER_DIR [ROUNDS] [N]
# ROWS (perftest: ib_write_lat ib_read_lat ib_atomic_lat ib_read_bw) and
# UCX (put get fadd get_bw) pick the rows; all by default.
# Prints: round side test size median_us avg_us load
B=$1 A=$2 R=${3:-3} N=${4:-200000}
ROWS=${ROWS:-ib_write_lat ib_read_lat ib_atomic_lat ib_read_bw}
UCX=${UCX:-put get fadd get_bw}
port() { echo $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 30000)); }
pt() { # side dir tool args...
	side=$1 dir=$2 tool=$3; shift 3
	p=$(port)
	timeout 150 nice -n 19 taskset -c 0 "$dir/bin/softverbs-run" $tool \
		-d softverbs0 -i 1 -p $p -n $N -F "$@" >/dev/null 2>&1 &
	srv=$!
	sleep 1
	l=$(cut -d' ' -f1 /proc/loadavg)
	out=$(timeout 120 nice -n 19 taskset -c 1 "$dir/bin/softverbs-run" \
		$tool -d softverbs0 -i 1 -p $p -n $N -F "$@" 127.0.0.1 2>&1)
	kill $srv 2>/dev/null
	wait $srv
	echo "$out" | awk -v s=$side -v t=$tool -v r=$i -v l=$l \
		'$1 ~ /^[0-9]+$/ && NF >= 5 { if (t ~ /_bw/) print r, s, t, $1, "bw_MBps", $4, "load=" l;
		 else print r, s, t, $1, "typ_us", $5, "avg_us", $6, "load=" l }'
}
ucx() { # test size extra...
	t=$1 s=$2; shift 2
	p=$(port)
	UCX_TLS=posix,self timeout 150 nice -n 19 ucx_perftest -p $p -c 0 \
		>/dev/null 2>&1 &
	srv=$!
	sleep 1
	l=$(cut -d' ' -f1 /proc/loadavg)
	UCX_TLS=posix,self timeout 120 nice -n 19 ucx_perftest 127.0.0.1 -p $p \
		-c 1 -t $t -s $s -n $N -w 1000 "$@" 2>&1 |
		awk -v t=$t -v s=$s -v r=$i -v l=$l '/^Final:/ {
		print r, "ucx", t, s, "p50", $3, "overall", $5, "MBps", $7, "load=" l }'
	kill $srv 2>/dev/null
	wait $srv
}
for i in $(seq $R); do
	for side in before after; do
		[ $side = before ] && d=$B || d=$A
		for t in $ROWS; do
			case $t in
			ib_write_lat|ib_read_lat) pt $side $d $t -s 8 ;;
			ib_atomic_lat) pt $side $d $t -A FETCH_AND_ADD ;;
			ib_read_bw) pt $side $d $t -s 4096 ;;
			esac
		done
	done
	for t in $UCX; do
		case $t in
		put) ucx ucp_put_lat 8 ;;
		get) ucx ucp_get 8 -O 1 ;;
		fadd) ucx ucp_fadd 8 -O 1 ;;
		get_bw) ucx ucp_get 4096 ;;
		esac
	done
done
