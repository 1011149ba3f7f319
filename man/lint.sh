#!/bin/sh
# man/lint.sh PAGE...: each man page must render without a single
# warning, as a reader's `man -l` would show it.  Per page:
#   groff -ww -z -man -Tutf8      every groff warning on, no output
#   MANWIDTH=80 man --warnings -l (man-db's pipeline: tbl, preconv, groff)
#   mandoc -Tlint -Wwarning       if mandoc is installed (optional)
# and the page's .TH must name it (NAME SECTION of its file name).  Any
# line on stderr, or a non-zero exit, fails the page; the script fails
# if one page did.  groff is required (Debian: groff-base, named in
# scripts/install-deps); man-db is used when present.
set -u

if ! command -v groff >/dev/null 2>&1; then
	echo "lint.sh: groff not found: install groff-base (scripts/install-deps)" >&2
	exit 1
fi
[ $# -gt 0 ] || { echo "usage: lint.sh PAGE..." >&2; exit 2; }

err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
failed=0

# check PAGE TOOL CMD...: runs CMD (stdout dropped); a non-zero exit or
# anything on stderr fails PAGE, and what was said is shown.
check() {
	page=$1 tool=$2
	shift 2
	"$@" >/dev/null 2>"$err"
	rc=$?
	if [ $rc -ne 0 ] || [ -s "$err" ]; then
		echo "FAIL $page: $tool (exit $rc):"
		sed 's/^/    /' "$err"
		failed=1
		return 1
	fi
	echo "ok   $page: $tool"
}

for page in "$@"; do
	if [ ! -r "$page" ]; then
		echo "FAIL $page: cannot read it"
		failed=1
		continue
	fi
	# softverbs-run.1 -> .TH SOFTVERBS\-RUN 1
	base=$(basename "$page")
	name=$(echo "${base%.*}" | tr 'a-z' 'A-Z' | sed 's/-/\\\\-/g')
	sect=${base##*.}
	if ! grep -q "^\.TH $name $sect\( \|\$\)" "$page"; then
		echo "FAIL $page: no '.TH $name $sect ...' line"
		failed=1
	fi
	# a control character (a form feed where \f was meant) is
	# silently dropped by -Tutf8, and the font change with it
	if LC_ALL=C grep -n "$(printf '[\001-\010\013-\037\177]')" "$page"; then
		echo "FAIL $page: control characters (above)"
		failed=1
	fi
	check "$page" "groff -ww -z -man -Tutf8" \
		groff -ww -z -man -Tutf8 "$page"
	if command -v man >/dev/null 2>&1; then
		check "$page" "man --warnings -l" \
			env MANWIDTH=80 MANPAGER=cat PAGER=cat LC_ALL=C.UTF-8 \
			man --warnings -l "$page"
	fi
	if command -v mandoc >/dev/null 2>&1; then
		# -Tlint reports on stdout
		check "$page" "mandoc -Tlint" \
			sh -c 'mandoc -Tlint -Wwarning "$1" 1>&2' lint "$page"
	fi
done
exit $failed
