#!/bin/sh
# An MPI job across hosts, unmodified (issue 29, item 2): four network
# namespaces a-d stand for hosts (setup.sh, SV_NETNS_HOSTS), mpirun runs in
# a and starts the ranks through rsh_agent.sh under softverbs-run, with
# SOFTVERBS_SUBNET and no UCX or GID settings but the transports.  Open
# MPI over UCX (pml ucx, rc_verbs with ud_verbs for wire-up):
#   pingpong_2_hosts: 8 B, 4 KiB and 1 MiB, every byte checked both ways;
#   collectives_4_hosts: allreduce and alltoall at three sizes, checked
#     on every rank;
#   killed_rank_4_hosts: a rank SIGKILLs itself mid-job: mpirun must fail
#     within the deadline (a hang is the failure this row exists for).
# --bind-to none: mpirun binds each host's first rank to core 0, and
# namespaces share one machine's CPUs (docs/ucx-mpi-libfabric.md).
# Open MPI's ofi MTL over libfabric's verbs;ofi_rxm (rdma_cm between
# hosts): the ping-pong and the collectives again (ofi_*).
# NetPIPE's NPmpi (Debian's NPopenmpi, netpipe-openmpi) in its integrity
# mode (-i: every message's bytes compared) from 1 B to 8 MiB + 1, over
# UCX and over ofi (netpipe_*: skipped without NPopenmpi).
# MPICH (Debian's is ch4:ucx) with the job built by mpicc.mpich
# (sv_mpi_job_mpich), its hydra launcher through the same agent:
# mpich_pingpong_2_hosts, mpich_collectives_4_hosts and
# mpich_killed_rank_4_hosts (as killed_rank_4_hosts: mpiexec.hydra must
# fail, not hang) (skipped without it).
#
# usage: netns_mpi.sh BUILD_DIR [openmpi|more]
# (openmpi, the default: the Open MPI rows and the killed rank, ctest
# netns.mpi; more: NetPIPE and MPICH, ctest netns.mpi_more)
# Needs root, ip(8) and Open MPI: otherwise it says why and exits 77.
set -u
build=$1
rows=${2:-openmpi}
run="$build/bin/softverbs-run"
job="$build/tests/sv_mpi_job"
job_mpich="$build/tests/sv_mpi_job_mpich"
tag="svm$$"
failed=0
ran=0
log=$(mktemp -d)
# each host's orted its own TMPDIR (rsh_agent.sh): the namespaces share
# /tmp and the host name, and two session directories made at once in one
# tree failed with "File exists" under load (the bench's MPI rows)
export SV_NETNS_TMPDIR="$log/tmp"
SV_NETNS_HOSTS="a b c d"

# shellcheck source=tests/netns/setup.sh disable=SC2154
. "$(dirname "$0")/setup.sh"
command -v mpirun >/dev/null || skip "needs mpirun (openmpi-bin)"
[ -x "$job" ] || skip "needs $job (built when CMake finds MPI)"

export SOFTVERBS_SUBNET=10.77.0.0/24 SV_NETNS_TAG="$tag" SV_RUN="$run"

# Open MPI over UCX, or (ofi_* rows) its ofi MTL over verbs;ofi_rxm
UCX="--mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs:aux -x UCX_NET_DEVICES=softverbs0:1"
OFI="--mca pml cm --mca mtl ofi -x FI_PROVIDER=verbs;ofi_rxm"

# mpi NAME DEADLINE HOSTS NP MODE...: mpirun's status, its output in
# $log/NAME; MODE and what follows are the program's arguments (after
# "np": NetPIPE's own program and arguments instead of the job's)
mpi() {
	case "$1" in
	*ofi_*) how=$OFI ;;
	*) how=$UCX ;;
	esac
	name=$1 deadline=$2 where=$3 np=$4
	shift 4
	if [ "$1" = np ]; then
		shift
		prog=
	else
		prog=$job
	fi
	# shellcheck disable=SC2086 # $run may be several words (ASan); $how
	# shellcheck disable=SC2086 # $prog: the job, or nothing
	timeout "$deadline" ip netns exec "$tag-a" $run mpirun \
		--allow-run-as-root -np "$np" -H "$where" --bind-to none \
		--mca plm_rsh_agent "$(dirname "$0")/rsh_agent.sh" \
		--mca oob_tcp_if_include 10.77.0.0/24 $how \
		-x SOFTVERBS_SUBNET $prog "$@" >"$log/$name" 2>&1
}

# judge NAME RC LAUNCHER: the job's row passed if RC is 0 and its output
# says "all checked"
judge() {
	if [ "$2" -eq 0 ] && grep -q "^all checked" "$log/$1"; then
		echo "ok   $1: $(grep -v "^all checked" "$log/$1" |
			grep -E "round trip|checked" | tr '\n' ';')"
	else
		fail "$1: $3 rc $2"
	fi
}

ok_row() { # NAME DEADLINE HOSTS NP MODE: exit 0 and "all checked"
	mpi "$@"
	judge "$1" $? mpirun
}

fail() {
	echo "FAIL $*"
	sed 's/^/  /' "$log/${1%%:*}" | tail -20
	failed=1
}


# NetPIPE, integrity mode: every size "Integrity check passed", none
# failed, and the last one 8 MiB + 1 (no perturbations, 3 repeats each)
np_row() { # NAME
	if ! command -v NPopenmpi >/dev/null; then
		echo "skip $1: needs NPopenmpi (netpipe-openmpi)"
		return
	fi
	ran=$((ran + 1))
	mpi "$1" 300 a,b 2 np NPopenmpi -i -p 0 -n 3 -u 8388609 \
		-o "$log/$1.out"
	rc=$?
	passed=$(grep -c "Integrity check passed" "$log/$1")
	if [ $rc -eq 0 ] && [ "$passed" -gt 20 ] &&
		! grep -qi "check failed" "$log/$1" &&
		grep -q "8388609 bytes.*Integrity check passed" "$log/$1"; then
		echo "ok   $1: $passed sizes, 1 B to 8 MiB + 1, bytes checked"
	else
		fail "$1: mpirun rc $rc, $passed sizes passed"
	fi
}

# MPICH: mpiexec.hydra starts a proxy a host through the agent; -iface:
# the proxies call back to a's veth address (the host name resolves to
# nothing these namespaces reach)
mpich() { # NAME DEADLINE HOSTS NP MODE: mpiexec.hydra's status
	UCX_TLS=rc_verbs,ud_verbs:aux \
		UCX_NET_DEVICES=softverbs0:1 timeout "$2" \
		ip netns exec "$tag-a" mpiexec.hydra -launcher rsh \
		-launcher-exec "$(dirname "$0")/rsh_agent.sh" -hosts "$3" \
		-np "$4" -iface "${tag}a" \
		-genvlist SOFTVERBS_SUBNET,UCX_TLS,UCX_NET_DEVICES \
		"$job_mpich" "$5" >"$log/$1" 2>&1
}

have_mpich() { # NAME: true if MPICH's rows can run, else says why
	if ! command -v mpiexec.hydra >/dev/null || [ ! -x "$job_mpich" ]; then
		echo "skip $1: needs mpiexec.hydra and $job_mpich (mpich, libmpich-dev)"
		return 1
	fi
	ran=$((ran + 1))
}

mpich_row() { # NAME DEADLINE HOSTS NP MODE: as ok_row
	have_mpich "$1" || return
	mpich "$@"
	judge "$1" $? mpiexec.hydra
}

# the killed rank: the launcher fails (not 0), does not hang (124), and
# the survivors did not go on to the end
judge_killed() { # NAME RC LAUNCHER
	if [ "$2" -ne 0 ] && [ "$2" -ne 124 ] &&
		! grep -q "1000 allreduces without" "$log/$1"; then
		echo "ok   $1: $3 rc $2:" \
			"$(grep -m1 -iE "signal|killed|exited|abort|terminat" \
				"$log/$1")"
	else
		fail "$1: $3 rc $2 (0: it went on; 124: hung)"
	fi
}

killed_row() {
	mpi killed_rank_4_hosts 240 a,b,c,d 4 kill
	judge_killed killed_rank_4_hosts $? mpirun
}

mpich_killed_row() {
	have_mpich mpich_killed_rank_4_hosts || return
	mpich mpich_killed_rank_4_hosts 240 a,b,c,d 4 kill
	judge_killed mpich_killed_rank_4_hosts $? mpiexec.hydra
}

case $rows in
openmpi)
	ok_row pingpong_2_hosts 240 a,b 2 pingpong
	ok_row collectives_4_hosts 240 a,b,c,d 4 coll
	ok_row ofi_pingpong_2_hosts 240 a,b 2 pingpong
	ok_row ofi_collectives_4_hosts 240 a,b,c,d 4 coll
	killed_row
	;;
more)
	np_row netpipe_2_hosts
	np_row ofi_netpipe_2_hosts
	mpich_row mpich_pingpong_2_hosts 240 a,b 2 pingpong
	mpich_row mpich_collectives_4_hosts 240 a,b,c,d 4 coll
	mpich_killed_row
	[ $ran -gt 0 ] || skip "needs NPopenmpi (netpipe-openmpi) or MPICH"
	;;
*)
	echo "netns_mpi.sh: unknown rows '$rows' (openmpi or more)"
	exit 2
	;;
esac

[ $failed -eq 0 ] && echo "netns_mpi.sh $rows: all passed"
exit $failed
