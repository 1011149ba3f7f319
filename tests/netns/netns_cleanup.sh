#!/bin/sh
# setup.sh's namespaces are gone when the script that sourced it ends:
# by exit 0, by a failure's exit, by SIGTERM (ctest's timeout), and when
# the script reuses the name of setup.sh's host list, as netns_mpi.sh did
# (hosts=a,b,c,d left four namespaces behind on each run).
#
# usage: netns_cleanup.sh BUILD_DIR
# Needs root and ip(8): otherwise it says why and exits 77.
set -u
build=$1
here=$(cd "$(dirname "$0")" && pwd)
failed=0

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to make network namespaces"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: needs ip(8) (iproute2)"; exit 77; }

# case HOW: a script sources setup.sh with four hosts, renames its host
# list, then ends as HOW says; none of its namespaces may remain
case_() {
	how=$1
	t="svc$$$how"
	SV_NETNS_HOSTS="a b c d" tag=$t how=$how \
		sh -c '
		build=$1 run=$1/bin/softverbs-run failed=0 log=$(mktemp -d)
		. "$2/setup.sh"
		echo "made:$sv_ns_made"
		hosts=a,b,c,d
		case $how in
		fail) exit 3 ;;
		term) kill -TERM $$; echo "went on after SIGTERM"; exit 0 ;;
		esac
		exit 0' sh "$build" "$here" >"/tmp/$t.log" 2>&1
	rc=$?
	made=$(sed -n 's/^made://p' "/tmp/$t.log" | wc -w)
	left=$(ip netns list | grep -c "^$t-")
	if [ "$made" -ne 5 ]; then
		echo "FAIL $how: setup made $made namespaces, not 5 (rc $rc)"
		sed 's/^/  /' "/tmp/$t.log" | tail -10
		failed=1
	elif [ "$left" -ne 0 ]; then
		echo "FAIL $how: $left of 5 namespaces left after rc $rc:" \
			"$(ip netns list | grep "^$t-" | tr '\n' ' ')"
		ip netns list | sed -n "s/^\($t-[a-z]*\).*/\1/p" |
			xargs -r -n1 ip netns del
		failed=1
	elif grep -q "went on" "/tmp/$t.log"; then
		echo "FAIL $how: the script went on after SIGTERM"
		failed=1
	else
		echo "ok   $how: rc $rc, 5 namespaces made, none left"
	fi
	rm -f "/tmp/$t.log"
}

case_ exit
case_ fail
case_ term

[ $failed -eq 0 ] && echo "netns_cleanup.sh: all passed"
exit $failed
