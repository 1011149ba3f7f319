#!/bin/sh
# An rsh agent for Open MPI's launcher that maps hosts to network
# namespaces (issue 29): `rsh_agent.sh HOST COMMAND...` runs COMMAND in
# namespace "$SV_NETNS_TAG-HOST" under softverbs-run ($SV_RUN), so that
# the orted there and the ranks it starts load softverbs.  Use:
#   SV_NETNS_TAG=svl123 SV_RUN=build/bin/softverbs-run \
#   mpirun --mca plm_rsh_agent tests/netns/rsh_agent.sh -H a,b ...
# (docs/ucx-mpi-libfabric.md, "Across hosts").
set -eu
host=$1
shift
# SV_NETNS_TMPDIR: a temporary directory per host under it (namespaces
# share /tmp and the host name: two orteds making their session
# directories in one tree at once can fail with "File exists")
if [ -n "${SV_NETNS_TMPDIR:-}" ]; then
	export TMPDIR="$SV_NETNS_TMPDIR/$host"
	mkdir -p "$TMPDIR"
fi
# SV_RUN may be several words: "env LD_PRELOAD=... softverbs-run"
# shellcheck disable=SC2086
exec ip netns exec "$SV_NETNS_TAG-$host" $SV_RUN sh -c "$*"
