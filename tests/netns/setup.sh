# shellcheck shell=sh disable=SC2154,SC2034 # the sourcing script sets and reads these
# Sourced by netns.sh and netns_cm.sh: three network namespaces a, b, c
# (SV_NETNS_HOSTS="a b c d" for a fourth, 10.77.0.4)
# (10.77.0.1-3/24 and fd00:5e::1-3/64) on a bridge of veth pairs (the bridge in a fourth,
# "hub", so the host's own network is untouched), removed on exit; and
# the helpers their rows use: in_ns, gid_of (ga/gb/gc set), gid6_of
# (ga6/gb6/gc6 set), listening, pair.  Expects build, run, tag, failed and log set; needs root and ip(8),
# else it says why and exits 77 (ctest: skipped).
skip() {
	echo "SKIP: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
command -v ip >/dev/null || skip "needs ip(8) (iproute2)"

hosts=${SV_NETNS_HOSTS:-a b c}
# cleanup removes the namespaces it finds in sv_ns_made, the list of those
# made, not ones named from $hosts: a sourcing script may reuse that name
# (netns_mpi.sh's mpi() set hosts=a,b,c,d and left four namespaces behind
# each run; netns_cleanup.sh)
sv_ns_made=
sv_ns_add() { # NAME: makes namespace NAME and lists it for cleanup
	ip netns add "$1" || return
	sv_ns_made="$sv_ns_made $1"
}
cleanup() {
	for ns in $sv_ns_made; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	sv_ns_made=
	[ -n "${SV_KEEP:-}" ] || rm -rf "$log"
}
# a signal ends the script (the EXIT trap then cleans up), not only the
# cleanup: rows went on after it with their namespaces gone
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# hub holds the bridge; a, b, c each a veth into it, 10.77.0.1-3/24
sv_ns_add "$tag-hub" || skip "cannot make a network namespace here"
ip -n "$tag-hub" link add br0 type bridge
ip -n "$tag-hub" link set br0 up
i=1
for n in $hosts; do
	sv_ns_add "$tag-$n" || exit 1
	ip link add "$tag$n" type veth peer name "$tag$n-h"
	ip link set "$tag$n" netns "$tag-$n"
	ip link set "$tag$n-h" netns "$tag-hub"
	ip -n "$tag-hub" link set "$tag$n-h" master br0 up
	ip -n "$tag-$n" addr add "10.77.0.$i/24" dev "$tag$n"
	# nodad: usable at once, not after duplicate address detection
	ip -n "$tag-$n" addr add "fd00:5e::$i/64" dev "$tag$n" nodad
	ip -n "$tag-$n" link set "$tag$n" up
	ip -n "$tag-$n" link set lo up
	i=$((i + 1))
done

# Under the ASan build, Debian's programs need the runtime loaded first
# (SV_ASAN_RUNTIME, from CMake); softverbs-run adds our library after it.
if [ -n "${SV_ASAN_RUNTIME:-}" ]; then
	run="env LD_PRELOAD=$SV_ASAN_RUNTIME ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 $run"
fi

in_ns() { # ns command...: a command of namespace ns, on softverbs
	n=$1
	shift
	# shellcheck disable=SC2086
	ip netns exec "$tag-$n" $run "$@"
}

# The GID index whose GID is the namespace's veth address (::ffff:10.77.0.x)
gid_of() {
	in_ns "$1" ibv_devinfo -v | sed -n \
		's/.*GID\[ *\([0-9]*\)\]:.*ffff:0a4d:000'"$2"'$/\1/p' | head -1
}
ga=$(gid_of a 1)
gb=$(gid_of b 2)
gc=$(gid_of c 3)
[ -n "$ga" ] && [ -n "$gb" ] && [ -n "$gc" ] || {
	echo "FAIL: no GID for the veth addresses ($ga/$gb/$gc)"
	in_ns a ibv_devinfo -v
	exit 1
}

# The GID index whose GID is the namespace's IPv6 veth address (fd00:5e::x)
gid6_of() {
	in_ns "$1" ibv_devinfo -v | sed -n \
		's/.*GID\[ *\([0-9]*\)\]:.*fd00:005e:0000:0000:0000:0000:0000:000'"$2"'$/\1/p' |
		head -1
}
ga6=$(gid6_of a 1)
gb6=$(gid6_of b 2)
gc6=$(gid6_of c 3)
[ -n "$ga6" ] && [ -n "$gb6" ] && [ -n "$gc6" ] || {
	echo "FAIL: no GID for the IPv6 veth addresses ($ga6/$gb6/$gc6)"
	in_ns a ibv_devinfo -v
	exit 1
}

port=$((20000 + $$ % 20000))
# listening NS PORT: waits (10 s at most) until a TCP port listens in NS
listening() {
	t=0
	until ip netns exec "$tag-$1" ss -Hltn "sport = :$2" | grep -q .; do
		[ $t -ge 200 ] && return 1
		t=$((t + 1))
		sleep 0.05 # no event says a port in another namespace listens
	done
}

# pair_once NAME DEADLINE SERVER_NS CLIENT_NS: one run of pair's
# programs ($sargs, $cargs) on a fresh port; sets rc and src
pair_once() {
	port=$((port + 1))
	sa=$(echo "$sargs" | sed "s/@P/$port/g")
	ca=$(echo "$cargs" | sed "s/@P/$port/g")
	# shellcheck disable=SC2086
	timeout "$2" ip netns exec "$tag-$3" $run $sa >"$log/$1.s" 2>&1 &
	spid=$!
	listening "$3" "$port"
	# shellcheck disable=SC2086
	timeout "$2" ip netns exec "$tag-$4" $run $ca >"$log/$1.c" 2>&1
	rc=$?
	wait $spid
	src=$?
}

# perftest's own clock fit before each report fails when the machine
# preempts it (tests/programs/programs.c): that run goes again.
clock_fit="Correlation coefficient r^2"

# pair NAME DEADLINE WANT SERVER_NS CLIENT_NS server argv -- client argv
# Runs a server in one namespace and its client in another (@P in the
# arguments: a fresh port); both must exit 0 within DEADLINE s and the
# client's output must contain WANT.
pair() {
	name=$1 dl=$2 want=$3 sns=$4 cns=$5
	shift 5
	sargs=""
	while [ "$1" != "--" ]; do
		sargs="$sargs $1"
		shift
	done
	shift
	cargs="$*"
	try=1
	while :; do
		pair_once "$name" "$dl" "$sns" "$cns"
		[ $rc -ne 0 ] || [ $src -ne 0 ] || break
		if [ $try -ge 3 ] ||
			! grep -qs "$clock_fit" "$log/$name.c" "$log/$name.s"; then
			break
		fi
		echo "note $name: run $try: perftest could not time its report; again"
		try=$((try + 1))
	done
	if [ $rc -ne 0 ] || [ $src -ne 0 ] || ! grep -q "$want" "$log/$name.c"; then
		echo "FAIL $name: client rc $rc, server rc $src"
		sed 's/^/  client: /' "$log/$name.c" | tail -15
		sed 's/^/  server: /' "$log/$name.s" | tail -15
		failed=1
	else
		echo "ok   $name: $(grep "$want" "$log/$name.c" | tail -1)"
	fi
}

