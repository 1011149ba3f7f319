# Functions and their lengths in kernel-style C (limits.sh): a body opens
# with "{" in column 0 and closes with "}" in column 0; a function's length
# counts from the line of its name to its closing brace.  Prints
# "file:line name length" for each function.
function strip_attributes(s,    i, depth, c, out) {
	while ((i = index(s, "__attribute__")) > 0) {
		out = substr(s, 1, i - 1)
		s = substr(s, i + length("__attribute__"))
		depth = 0
		while (length(s) > 0) {
			c = substr(s, 1, 1)
			s = substr(s, 2)
			if (c == "(")
				depth++
			else if (c == ")" && --depth == 0)
				break
		}
		s = out s
	}
	return s
}
FNR == 1 { decl = ""; decl_line = 0; open = 0 }
# a top-level declaration starts in column 0 (not a brace, comment,
# preprocessor line or label-like continuation)
!open && /^[A-Za-z_]/ { decl = $0; decl_line = FNR }
!open && /^\{/ && decl_line {
	s = strip_attributes(decl)
	if (match(s, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
		name = substr(s, RSTART, RLENGTH)
		sub(/[ \t]*\($/, "", name)
		open = 1
	}
	next
}
open && /^\}/ {
	printf "%s:%d %s %d\n", FILENAME, decl_line, name, FNR - decl_line + 1
	open = 0
	decl_line = 0
}
