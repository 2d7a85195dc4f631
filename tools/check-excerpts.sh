#!/bin/sh
# Fails unless every code block of a Markdown file that is tagged as an excerpt is exactly the
# part of a source file it names, so that the snippets a reader copies are code that compiles
# and runs (`make examples` builds and runs the source files).
#
# In the Markdown file, the line before the block's opening fence is an HTML comment, which a
# renderer does not show:
#
#   <!-- excerpt: examples/speculative.c engine -->
#
# In the source file, the part lies between the comment lines `/* README excerpt: engine */`
# and `/* README excerpt end */`; the indentation of the opening comment is removed from every
# line of the part, so a part from inside a function reads as it would at the top level. Every
# part of every source file named must be shown somewhere, so that none is left unchecked.
#
# usage: tools/check-excerpts.sh FILE.md
set -eu

[ $# -eq 1 ] || { echo "usage: $0 FILE.md" >&2; exit 2; }
md=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The tagged blocks of the Markdown file: $work/md/<source with / as %>@<name>.
mkdir -p "$work/md" "$work/src"
awk -v out="$work/md" '
    /^<!-- excerpt: [^ ]+ [^ ]+ -->$/ { src = $3; name = $4; next_is_fence = 1; next }
    next_is_fence && /^```/ { gsub("/", "%", src); file = out "/" src "@" name; inblock = 1;
                              printf "" > file; next_is_fence = 0; next }
    { next_is_fence = 0 }
    inblock && /^```$/ { inblock = 0; close(file); next }
    inblock { print > file }
' "$md"

fail=0
sources=$(ls "$work/md" | sed 's/@.*//' | sort -u)
[ -n "$sources" ] || { echo "check-excerpts: $md tags no excerpt" >&2; exit 1; }
for s in $sources; do
    src=$(echo "$s" | tr '%' '/')
    [ -f "$src" ] || { echo "check-excerpts: $md names $src, which does not exist" >&2; fail=1; continue; }
    awk -v out="$work/src" -v tag="$s" '
        /^[ ]*\/\* README excerpt end \*\/$/ { if (file != "") close(file); file = ""; next }
        /^[ ]*\/\* README excerpt: [^ ]+ \*\/$/ {
            indent = $0; sub(/[^ ].*/, "", indent); file = out "/" tag "@" $4; printf "" > file; next }
        file != "" { line = $0; if (index(line, indent) == 1) line = substr(line, length(indent) + 1);
                     print line > file }
    ' "$src"
done
for f in "$work"/src/*; do
    part=$(basename "$f")
    where="$(echo "${part%@*}" | tr '%' '/') part '${part#*@}'"
    if [ ! -f "$work/md/$part" ]; then
        echo "check-excerpts: $md does not show $where" >&2
        fail=1
    elif ! diff -u "$f" "$work/md/$part" >&2; then
        echo "check-excerpts: $md's block for $where differs from the source (diff above: - source, + $md)" >&2
        fail=1
    fi
done
for f in "$work"/md/*; do
    part=$(basename "$f")
    if [ ! -f "$work/src/$part" ]; then
        echo "check-excerpts: $md shows $(echo "${part%@*}" | tr '%' '/') part '${part#*@}', which the source does not mark" >&2
        fail=1
    fi
done
[ $fail -eq 0 ] || exit 1
echo "check-excerpts: $(ls "$work/md" | wc -l) blocks of $md are excerpts of $(echo $sources | tr "%" "/")"
