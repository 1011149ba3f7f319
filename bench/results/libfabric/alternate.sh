#!/bin/bash
# ab2.sh ROUNDS ITERS CONFIGS...: alternate configs (NAME:PROV:EP:RUNDIR, RUNDIR '-' = no softverbs-run)
# per run: client wall (s), client+server CPU (s), load
rounds=$1 iters=$2; shift 2
for i in $(seq $rounds); do
  for cfg in "$@"; do
    IFS=: read name prov ep dir <<< "$cfg"
    p=$(python3 -c 'import socket;s=socket.socket();s.bind(("",0));print(s.getsockname()[1])')
    if [ "$dir" = - ]; then RUN=; else RUN=$dir/bin/softverbs-run; fi
    T="/usr/bin/time -f %e:%U:%S"
    $T $RUN fi_pingpong -p "$prov" -e $ep -I $iters -B $p > s.$p 2>&1 &
    for k in $(seq 500); do ss -ltn "sport = :$p" | grep -q LISTEN && break; sleep 0.005; done
    a=$(date +%s%N)
    $T $RUN fi_pingpong -p "$prov" -e $ep -I $iters -P $p 127.0.0.1 > c.$p 2>&1; rc=$?
    b=$(date +%s%N)
    wait; 
    sc=$(tail -1 s.$p | awk -F: '{print $2+$3}'); cc=$(tail -1 c.$p | awk -F: '{print $2+$3}')
    n=$(grep -c "=$iters\|=1k" c.$p)
    echo "$name rc=$rc rows=$n wall=$(echo "scale=3;($b-$a)/1000000000" | bc) cpu=$(echo "$sc+$cc" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
    rm -f s.$p c.$p
  done
done
