#!/bin/sh
# postpoll_{read,write,fadd} (bench/floor/postpoll.c) with the "before"
# and the "after" libibverbs, alternated round by round, each preloaded
# the same way.  Usage: pp_ab.sh BUILD BEFORE_LIB AFTER_LIB [ROUNDS]
# Prints: round side op size rtt_us best_us cpu_us load
BIN=$1/bin B=$2 A=$3 R=${4:-5}
for i in $(seq $R); do
	for side in before after; do
		[ $side = before ] && lib=$B || lib=$A
		for op in read write fadd; do
			l=$(cut -d' ' -f1 /proc/loadavg)
			LD_PRELOAD=$lib nice -n 19 "$BIN/postpoll_$op" -m rtt \
				-s 8 -t 0.2 -c 0,1 | grep '^size=' |
				sed "s/^/$i $side $op /; s/\$/ load=$l/"
		done
	done
done
