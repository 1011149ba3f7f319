#!/bin/sh
# The size limits of issue 25: no .c file in provider/ or rdmacm/ over
# 1,000 lines, and no function there over 100 lines (kernel style: a body
# opens with "{" in column 0 and closes with "}" in column 0; a function
# counts from the line of its name to its closing brace; limits.awk).
# A file that needs more is two files; a function that needs more is
# steps with names.
#   limits.sh SRCDIR [DIR...]     check SRCDIR's DIRs (provider rdmacm)
#   limits.sh --selftest FIXTURE  it must catch FIXTURE's long function
# Prints "file:line name length" for each function over the limit.
here=$(cd "$(dirname "$0")" && pwd)
max_file=1000
max_function=100

# Violators allowed for a while: "<file> <function or -> <lines>"; "-" is
# the file's own length.  One may only shrink; remove its row once it is
# within the limit.  A violator not listed fails.  The list is empty: the
# violators the limits found when they came have been split (issue 25),
# so any file or function over the limit now fails.
allowed='
'

if [ "$1" = --selftest ]; then
	# The fixture has one function of 101 lines and one of 100: the check
	# must fail, name the first with its length, and pass the second.
	out=$(sh "$0" "$2" . 2>&1) && {
		echo "limits.sh: passed $2, which has a function of 101 lines" >&2
		exit 1
	}
	echo "$out"
	echo "$out" | grep -q 'long.c:[0-9]* too_long 101:' || {
		echo "limits.sh: did not name too_long (101 lines)" >&2
		exit 1
	}
	if echo "$out" | grep -q 'just_right'; then
		echo "limits.sh: named just_right, which has 100 lines" >&2
		exit 1
	fi
	exit 0
fi

src=$1
shift
[ $# -gt 0 ] || set -- provider rdmacm
cd "$src" || exit 2
files=$(find "$@" -name '*.c' | sort)
[ -n "$files" ] || { echo "limits.sh: no .c files in $*" >&2; exit 2; }

# check FILE NAME LINES WHERE: 0 when within the limit or allowed.
check() {
	was=$(printf '%s\n' "$allowed" | awk -v f="$1" -v n="$2" \
		'$1 == f && $2 == n { print $3 }')
	if [ -z "$was" ]; then
		echo "$4 $2 $3: over the limit of $5 lines" \
			"(split it; limits.sh)"
		return 1
	fi
	if [ "$3" -gt "$was" ]; then
		echo "$4 $2 $3: grew from $was (allowed only to shrink)"
		return 1
	fi
	echo "note: $4 $2 $3: allowed ($was when the limit came)"
	return 0
}

fail=0
for f in $files; do
	n=$(wc -l < "$f")
	if [ "$n" -gt $max_file ]; then
		check "$f" - "$n" "$f:1" $max_file || fail=1
	fi
done
lengths=$(awk -f "$here/limits.awk" $files) || exit 2
over=$(printf '%s\n' "$lengths" | awk -v m=$max_function '$3 > m')
while read -r at name len; do
	[ -n "$at" ] || continue
	check "${at%:*}" "$name" "$len" "$at" $max_function || fail=1
done <<END
$over
END

# rows whose violator is now within its limit: the list should lose them
printf '%s\n' "$allowed" | while read -r f name len; do
	[ -n "$f" ] || continue
	case " $* " in *" ${f%%/*} "*) ;; *) continue ;; esac
	if [ "$name" = - ]; then
		[ -f "$f" ] && [ "$(wc -l < "$f")" -gt $max_file ] && continue
	else
		printf '%s\n' "$over" | grep -q "^$f:[0-9]* $name " && continue
	fi
	echo "note: $f $name is within the limit now: remove its row"
done
exit $fail
