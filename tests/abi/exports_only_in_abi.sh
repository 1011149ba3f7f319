#!/bin/sh
# Exported symbols live in provider/abi/ alone (DESIGN.md, "provider/").
#   exports_only_in_abi.sh SOURCE_DIR [OBJECT_DIR]
# Fails if a provider source below abi/ spells an export (SV_EXPORT,
# SV_SYMVER, visibility("default")) outside comments and objects.h's poison
# line, or if an object of libibverbs.so.1 built from such a source
# (OBJECT_DIR: the softverbs target's CMakeFiles/softverbs.dir) defines a
# global symbol with default visibility.  devfiles.c is another library
# (libsoftverbs-devfiles.so) with its own exports: not checked.
src=$1/provider
objs=$2
bad=0

for f in $(find "$src" -path "$src/abi" -prune -o -path "$src/devfiles" \
	-prune -o -name '*.[ch]' -print | sort); do
	if grep -n 'SV_EXPORT\|SV_SYMVER\|visibility *( *"default"' "$f" |
		grep -v '^[0-9]*:[[:space:]]*\(\*\|/\*\|//\|#pragma GCC poison\)' |
		sed "s|^|$f:|" | grep .; then
		bad=1
	fi
done

if [ -n "$objs" ]; then
	n=0
	for o in $(find "$objs" -path "$objs/abi" -prune -o -name '*.o' \
		-print); do
		n=$((n + 1))
		# Ndx UND is a reference, not a definition
		if readelf -sW "$o" |
			awk '$5 == "GLOBAL" && $6 == "DEFAULT" && $7 != "UND"' |
			sed "s|^|$o:|" | grep .; then
			bad=1
		fi
	done
	if [ "$n" -eq 0 ]; then
		echo "no objects in $objs" >&2
		exit 1
	fi
	echo "$n objects below abi/ checked"
fi
[ "$bad" -eq 0 ] && echo "no export below provider/abi/"
exit $bad
