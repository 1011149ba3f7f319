#!/bin/sh
# SOFTVERBS_PROGRESS_CPUS (provider/lib/cpus.h): where a context's progress
# thread runs, seen in /proc by tests/sv_progress_cpus.  $1: the build
# directory.  Needs two CPUs (else skipped: 77).
set -u
probe="$1/tests/sv_progress_cpus"
mine=$(awk '/^Cpus_allowed_list:/{print $2}' /proc/self/status)
case "$mine" in
*[-,]*) ;;
*) echo "SKIP: one CPU allowed ($mine)"; exit 77 ;;
esac
second=$(echo "$mine" | sed 's/^[0-9]*[-,]//; s/[-,].*//')
failed=0
row() { # name expect env-value bind-cpu
	got=$(env ${3:+SOFTVERBS_PROGRESS_CPUS=$3} "$probe" "$4" 2>"$1.err")
	if [ "$got" = "$2" ]; then
		echo "ok   $1: $got"
	else
		echo "FAIL $1: got '$got', want '$2'"; cat "$1.err"
		failed=1
	fi
}
cd "$(mktemp -d)" || exit 1
row inherit_by_default 0 "" 0
row inherit 0 inherit 0
row all_widens_a_bound_program "$mine" all 0
row a_list "$second" "$second" 0
row a_range "0-$second" "0-$second" "$second"
# a bad value: one line naming it, the thread keeps the program's CPU
row bad_value 0 "3-1" 0
grep -q "SOFTVERBS_PROGRESS_CPUS" bad_value.err ||
	{ echo "FAIL bad_value: stderr does not name the variable"; failed=1; }
# a CPU no cgroup has: refused by the kernel, said, inherited
row cpu_not_here 0 1000 0
grep -q "SOFTVERBS_PROGRESS_CPUS=1000: Invalid argument" cpu_not_here.err ||
	{ echo "FAIL cpu_not_here: stderr: $(cat cpu_not_here.err)"; failed=1; }
exit $failed
