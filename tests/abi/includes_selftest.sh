#!/bin/sh
# includes.sh still finds an include up: on a copy of provider/, core/cq.c
# includes the engine's header (layer 2 from layer 5), and verbs/ah.c
# includes sv.h, which is gone.  ctest expects the first line; the second
# must be named too.
#   includes_selftest.sh INCLUDES_SH PROVIDER_DIR
includes=$1
prov=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp -R "$prov/." "$tmp/" || exit 1
echo '#include "engine.h"' >>"$tmp/core/cq.c" || exit 1
echo '#include "sv.h"' >>"$tmp/verbs/ah.c" || exit 1
out=$(sh "$includes" "$tmp") && {
	echo "includes_selftest: includes.sh passed an include up" >&2
	exit 1
}
printf '%s\n' "$out"
case $out in
*"verbs/ah.c includes sv.h"*) exit 0 ;;
esac
echo "includes_selftest: includes.sh did not name sv.h" >&2
exit 1
