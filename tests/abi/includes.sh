#!/bin/sh
# The layers of provider/ (DESIGN.md, "provider/") in its #include lines:
# a file includes headers of its own layer or of a lower one (a larger
# number), or one of the pairs listed below.  abi.layers checks the calls
# with nm; this checks the sources, so it also sees the headers' inline
# functions and a declaration taken from above before it is called.
#   includes.sh PROVIDER_DIR
# A bare name resolves as the compiler finds it: the including file's
# directory, then SV_PROVIDER_INCLUDE_DIRS in its order.  "sv.h" (split
# into the layers' headers by issue 25) fails here:
# a file must include the headers of what it uses instead (issue 25's
# rewrite_includes.py did so for the tree then).
prov=$1
cd "$prov" || exit 1

# The includes up: "<including file> <included file>", with why.
up='
core/objects.h transport/link.h		a QP embeds its link (struct sv_link)
core/objects.h loop/evloop.h		a pfd embeds its io, a QP its timer
wire/pcap_ib.h core/objects.h		the capture reads a QP: qp->pcap
wire/pcap.c core/objects.h		... its addresses, PSNs and SGEs
wire/pcap_train.c core/objects.h	...
lib/stat.c core/objects.h		the counters read a QP: qp->stats
verbs/entry.h abi/private_verbs.h	the rdma-core prototypes it implements
lib/env.c transport/rmem.h		the defaults and bounds of variables
lib/env.c transport/tcp/tcp.h		... are constants of those layers
lib/env.c wire/wire.h			... (macros only)
'

files=$(find . \( -name '*.c' -o -name '*.h' \) ! -path './devfiles/*' |
	sed 's|^\./||' | sort)
n=$(printf '%s\n' "$files" | wc -l)
if [ "$n" -lt 40 ]; then
	echo "includes.sh: only $n files in $prov" >&2
	exit 1
fi

# awk gets: "F <file>" for every file (what a name may resolve to), "P
# <from> <to>" for the list above, then each file's text after a line
# "T <file>"
{
	for f in $files; do
		echo "F $f"
	done
	printf '%s\n' "$up" | awk 'NF >= 2 { print "P", $1, $2 }'
	for f in $files; do
		echo "T $f"
		grep '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f"
	done
} | awk '
	# 0 ABI, 1 verbs, 2 engine, 3 transports, 4 loop, 5 core, 8 wire,
	# 9 lib (layers.sh)
	function layer(f) {
		if (f ~ /^abi\//) return 0
		if (f ~ /^verbs\//) return 1
		if (f ~ /^engine\//) return 2
		if (f ~ /^transport\//) return 3
		if (f ~ /^loop\//) return 4
		if (f ~ /^core\//) return 5
		if (f ~ /^wire\//) return 8
		if (f ~ /^lib\//) return 9
		return -1
	}
	function dir(f) {
		return f ~ /\// ? substr(f, 1, match(f, /\/[^\/]*$/)) : ""
	}
	# the file a quoted name names, as gcc finds it; "" if none
	function resolve(from, name,   i, d) {
		if ((dir(from) name) in file)
			return dir(from) name
		for (i = 1; i <= nd; i++) {
			d = dirs[i]
			if ((d name) in file)
				return d name
		}
		return ""
	}
	BEGIN {
		nd = split(" verbs/ engine/ transport/ transport/tcp/ loop/" \
			   " core/ wire/ lib/", dirs, " ")
		# SV_PROVIDER_INCLUDE_DIRS starts with provider/ itself
		nd++
		for (i = nd; i > 1; i--)
			dirs[i] = dirs[i - 1]
		dirs[1] = ""
		for (i = 1; i <= nd; i++)
			known[dirs[i]] = 1
	}
	$1 == "F" {
		file[$2] = 1
		# a directory not in the list above (a new one: add it to
		# SV_PROVIDER_INCLUDE_DIRS too) is searched after them
		d = dir($2)
		if (d != "" && !(d in known)) {
			known[d] = 1
			dirs[++nd] = d
		}
		if (layer($2) < 0) {
			printf "includes.sh: %s is in no layer: place it in a " \
			       "layer'"'"'s directory (DESIGN.md)\n", $2
			bad = 1
		}
		next
	}
	$1 == "P" { up[$2 " " $3] = 1; next }
	$1 == "T" { cur = $2; next }
	{
		name = $0
		sub(/^[^"]*"/, "", name)
		sub(/".*/, "", name)
		to = resolve(cur, name)
		if (to == "") {
			if (name == "sv.h")
				printf "%s includes sv.h, which issue 25 split " \
				       "into one header per layer: include " \
				       "the headers of what it uses\n", cur
			else
				printf "%s includes \"%s\": no such file in " \
				       "provider/\n", cur, name
			bad = 1
			next
		}
		if (layer(to) >= layer(cur) || (cur " " to) in up)
			next
		printf "include up not in the list: %s (layer %d) includes " \
		       "%s (layer %d)\n", cur, layer(cur), to, layer(to)
		bad = 1
	}
	END {
		if (!bad)
			print "every #include goes down a layer or is listed"
		exit bad
	}'
