#!/bin/sh
# Checks what libmemra exports against what abi/memra.h declares, and that every version number
# in the tree tells the same story:
#   - MEMRA_VERSION_MAJOR/MINOR/PATCH in the header equal the Makefile's VERSION_* (passed in);
#   - the library file is libmemra.so.MAJOR.MINOR.PATCH and its SONAME libmemra.so.MAJOR;
#   - the version script defines nodes MEMRA_MAJOR.0 .. MEMRA_MAJOR.k, k <= MINOR, and nothing
#     newer than the header;
#   - the defined dynamic symbols are exactly the functions the header declares, each a
#     function (no exported data), each under one of those nodes;
#   - the library needs no CUDA library at load time (the CUDA runtime is linked statically).
#
# usage: abi/check-exports.sh LIBRARY HEADER VERSION_SCRIPT MAJOR MINOR PATCH
# CC (the C compiler, used as the preprocessor that strips the header's comments) is taken from
# the environment. Exits non-zero, naming every mismatch, when anything disagrees.
set -eu

if [ $# -ne 6 ]; then
    echo "usage: $0 LIBRARY HEADER VERSION_SCRIPT MAJOR MINOR PATCH" >&2
    exit 2
fi
lib=$1 header=$2 map=$3 major=$4 minor=$5 patch=$6
cc=${CC:-cc}
fail=0
problem() {
    echo "check-exports: $*" >&2
    fail=1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Version macros of the header against the Makefile.
for part in MAJOR MINOR PATCH; do
    case $part in
    MAJOR) want=$major ;;
    MINOR) want=$minor ;;
    PATCH) want=$patch ;;
    esac
    got=$(sed -n "s/^#define MEMRA_VERSION_${part} \([0-9][0-9]*\)\$/\1/p" "$header")
    if [ "$got" != "$want" ]; then
        problem "$header defines MEMRA_VERSION_$part '$got' but the Makefile says VERSION_$part = $want"
    fi
done

# File name and SONAME.
want_file=libmemra.so.$major.$minor.$patch
if [ "$(basename "$lib")" != "$want_file" ]; then
    problem "the library is $(basename "$lib"), expected $want_file"
fi
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
if [ "$soname" != "libmemra.so.$major" ]; then
    problem "SONAME is '$soname', expected libmemra.so.$major"
fi

# Version nodes the version script defines, in order (comments removed first: they may name
# nodes as examples).
perl -0777 -pe 's{/\*.*?\*/}{}gs' "$map" |
    sed -n 's/^[[:space:]]*\(MEMRA_[0-9A-Za-z_.]*\)[[:space:]]*{.*/\1/p' >"$tmp/nodes"
if [ ! -s "$tmp/nodes" ]; then
    problem "$map defines no MEMRA_* version node"
fi
expect_minor=0
while read -r node; do
    if [ "$node" != "MEMRA_$major.$expect_minor" ]; then
        problem "$map: version node $node, expected MEMRA_$major.$expect_minor (nodes are MEMRA_$major.0, MEMRA_$major.1, ... in order)"
    fi
    expect_minor=$((expect_minor + 1))
done <"$tmp/nodes"
newest=$(tail -n 1 "$tmp/nodes")
newest_minor=${newest##*.}
case $newest_minor in
'' | *[!0-9]*) problem "$map: cannot read the minor version of node '$newest'" ;;
*)
    if [ "$newest_minor" -gt "$minor" ]; then
        problem "$map defines $newest, newer than the header's version $major.$minor"
    fi
    ;;
esac

# Functions the header declares: preprocess (which drops comments, whose prose names
# functions too) and take the name before the parameter list of every declaration that carries
# the export attribute MEMRA_API expands to.
# shellcheck disable=SC2086 # $cc may be a word list such as "ccache gcc"
$cc -E -P -x c "$header" >"$tmp/header.i"
tr '\n' ' ' <"$tmp/header.i" |
    grep -oE 'visibility\("default"\)\)\)[^;(]*[^A-Za-z0-9_]memra_[a-z0-9_]+ *\(' |
    grep -oE 'memra_[a-z0-9_]+' | sort >"$tmp/declared"
n_marked=$(grep -o 'visibility("default")' "$tmp/header.i" | wc -l)
n_declared=$(wc -l <"$tmp/declared")
if [ "$n_declared" -eq 0 ] || [ "$n_marked" -ne "$n_declared" ]; then
    problem "$header: found $n_marked MEMRA_API declarations but could read only $n_declared memra_* function names"
fi
if [ "$(sort -u "$tmp/declared" | wc -l)" -ne "$n_declared" ]; then
    problem "$header declares a function twice: $(uniq -d "$tmp/declared" | tr '\n' ' ')"
fi

# Defined dynamic symbols. The linker adds one absolute symbol per version node (named like the
# node); everything else must be a memra_* function at a node of the version script.
nm -D --defined-only --with-symbol-versions "$lib" >"$tmp/nm"
: >"$tmp/exported"
while read -r _addr type sym; do
    case $sym in
    *@@*)
        name=${sym%%@@*}
        version=${sym#*@@}
        ;;
    *@*)
        name=${sym%%@*}
        version=${sym#*@}
        problem "$name is exported only as a non-default version ($sym)"
        ;;
    *)
        name=$sym
        version=
        ;;
    esac
    if [ "$type" = A ] && [ -z "$version" ] && grep -qx "$name" "$tmp/nodes"; then
        continue
    fi
    if [ "$type" != T ]; then
        problem "$sym is exported with nm type $type; only functions (T) may be exported"
    fi
    if [ -z "$version" ]; then
        problem "$name is exported without a symbol version"
    elif ! grep -qx "$version" "$tmp/nodes"; then
        problem "$name is exported at version $version, which $map does not define"
    fi
    echo "$name" >>"$tmp/exported"
done <"$tmp/nm"
sort -o "$tmp/exported" "$tmp/exported"

missing=$(comm -23 "$tmp/declared" "$tmp/exported" | tr '\n' ' ')
extra=$(comm -13 "$tmp/declared" "$tmp/exported" | tr '\n' ' ')
if [ -n "$missing" ]; then
    problem "declared in $header but not exported: $missing"
fi
if [ -n "$extra" ]; then
    problem "exported but not declared in $header: $extra"
fi

# Load-time dependencies: libmemra must load where no CUDA is installed.
if readelf -d "$lib" | grep '(NEEDED)' | grep -Eq 'libcuda|libcudart|libnv'; then
    problem "the library needs a CUDA library at load time: $(readelf -d "$lib" | grep '(NEEDED)' | grep -E 'libcuda|libcudart|libnv' | tr -s ' ')"
fi
ldd "$lib" >"$tmp/ldd" 2>&1 || problem "ldd $lib failed: $(cat "$tmp/ldd")"
if grep -q 'cudart' "$tmp/ldd"; then
    problem "ldd lists libcudart: $(grep cudart "$tmp/ldd" | tr -s ' \t' ' ')"
fi
if grep -q 'not found' "$tmp/ldd"; then
    problem "ldd cannot resolve: $(grep 'not found' "$tmp/ldd" | tr -s ' \t' ' ')"
fi

if [ "$fail" -ne 0 ]; then
    exit 1
fi
echo "check-exports: $n_declared functions exported as declared, versions $major.$minor.$patch agree (nodes: $(tr '\n' ' ' <"$tmp/nodes"| sed 's/ $//')), SONAME $soname, no CUDA library needed"
