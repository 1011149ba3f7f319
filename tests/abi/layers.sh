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

# layer of a file, in L: its directory (DESIGN.md, "provider/").
# 0 ABI, 1 verbs objects, 2 engine, 3 transports, 4 progress, 5 core
# (the objects' data path the layers above share: core/core.h); 8 wire
# formats and 9 services, which every layer may call (they call nothing
# above them)
layer() {
	case $1 in
	abi/*) L=0 ;;
	verbs/*) L=1 ;;
	engine/*) L=2 ;;
	transport/*) L=3 ;;
	loop/*) L=4 ;;
	core/*) L=5 ;;
	wire/*) L=8 ;;
	lib/*) L=9 ;;
	*) echo "layers.sh: $1 is in no layer: place it in a layer's" \
		"directory and in DESIGN.md" >&2
	   L=-1 ;;
	esac
}

# The calls up: "<caller file> <symbol>"; * is any caller below.
up=''

cd "$objs" || exit 1
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
# Tables for one awk to join: one nm for all the objects, no process per
# object or symbol (a fork per undefined symbol, ~3,000 of them, took this
# test to its 60 s deadline on a loaded 2-CPU machine).
#   "L <file> <layer>", "P <caller> <symbol>" (the calls up), then nm -A:
#   "<file>.o:<address> <type> <symbol>", "<file>.o: U <symbol>"
n=0
objects=$(find . -name '*.o' | sed 's|^\./||' | sort)
for o in $objects; do
	n=$((n + 1))
	layer "${o%.o}"
	echo "L ${o%.o} $L"
done >"$tmp"
if [ "$n" -lt 20 ]; then
	echo "layers.sh: only $n objects in $objs" >&2
	exit 1
fi
printf '%s\n' "$up" | awk 'NF == 2 { print "P", $1, $2 }' >>"$tmp"
nm -A $objects >>"$tmp" || exit 1

# read twice: every definition is known before the first use
awk -v n="$n" '
	$1 == "L" || $1 == "P" {
		if (FNR != NR)
			next
		if ($1 == "L")
			lay[$2] = $3
		else
			up[$2 " " $3] = 1
		if ($1 == "L" && $3 < 0)
			bad = 1
		next
	}
	NF == 3 {
		f = $1
		sub(/\.o:.*/, "", f)
		if (FNR == NR) {
			if ($2 ~ /^[A-TV-Z]$/ && !($3 in def))
				def[$3] = f # global, defined
			next
		}
		if ($2 != "U" && $2 != "w")
			next
		sym = $3; from = f; to = def[sym]
		if (to == "" || to == from)
			next
		if (lay[to] + 0 >= lay[from] + 0)
			next # down, sideways, a service
		if (("* " sym) in up || (from " " sym) in up)
			next
		printf "up-call not in the list: %s (layer %d) -> %s (%s, " \
		       "layer %d)\n", from, lay[from], sym, to, lay[to]
		bad = 1
	}
	END {
		if (!bad)
			print n " objects: every call up is a listed one"
		exit bad
	}' "$tmp" "$tmp"
