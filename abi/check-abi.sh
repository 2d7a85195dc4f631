#!/bin/sh
# The ABI of libmemra against the stored baseline, with libabigail.
#
# usage: abi/check-abi.sh dump  LIBRARY OUT.xml
#        abi/check-abi.sh check LIBRARY BASELINE.xml SUPPRESSIONS WORKDIR
#
# `dump` writes the ABI description of LIBRARY (built with -g) to OUT.xml; `make abi-baseline`
# uses it to (re)write abi/baseline/. `check` dumps LIBRARY the same way into WORKDIR and fails
# unless it is compatible with BASELINE.xml:
#   1. abidiff with SUPPRESSIONS (abi/abi.supp) reports nothing: every change other than the
#      waived ones (appended fields of extensible structs, functions added under a newer
#      version node) fails;
#   2. the extensible structs that SUPPRESSIONS names are, up to their baseline size, still
#      exactly the baseline struct. libabigail's "has_data_member_inserted_at = end" waiver
#      also waives reordered or retyped members of the same struct when no member was removed
#      (seen with abigail-tools 2.2), so the second pass cuts the appended members off the
#      current description and diffs again without the struct waiver.
set -eu

# What goes into the description. Locations and paths are left out so that the baseline depends
# neither on where the tree was built nor on comments or line numbers in the header (doc-comment
# edits leave it byte-identical). DT_NEEDED is left out because it lists the static CUDA
# runtime's system libraries only in a CUDA build. Only types that abi/memra.h defines
# are kept: the engine's private struct behind the opaque MemraEngine handle is not ABI. Only
# exported interfaces are described, not the libc or internal functions the code calls (which a
# CUDA build has more of). Hashed type ids keep a regenerated baseline's diff small.
abi_dump() {
    abidw --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed --no-architecture \
        --header-file "$(dirname "$0")/memra.h" --drop-private-types --exported-interfaces-only \
        --type-id-style hash \
        --out-file "$2" "$1"
    if ! grep -q '<function-decl name=.memra_' "$2"; then
        echo "check-abi: $1 carries no DWARF for its memra_* functions; build it with -g" >&2
        exit 1
    fi
}

# Names of the structs an abidiff suppression file lets grow at the end.
extensible_structs() {
    awk '/^\[/ { section = $0 }
         section == "[suppress_type]" && $1 == "name" && $2 == "=" { print $3 }' "$1"
}

# The suppression file without its [suppress_type] sections.
without_type_waivers() {
    awk '/^\[/ { keep = ($0 != "[suppress_type]") } keep { print }' "$1"
}

# Copies an abidw description, cutting every definition of struct $1 down to $2 bits: members
# at or after that offset are dropped and the size is set to $2. abidw writes one element per
# line, a data member as <data-member ...>, <var-decl .../>, </data-member>.
truncate_struct() {
    awk -v name="$1" -v bits="$2" '
        index($0, "<class-decl name='\''" name "'\''") && !index($0, "/>") {
            inside = 1
            sub(/size-in-bits='\''[0-9]+'\''/, "size-in-bits='\''" bits "'\''")
        }
        inside && /<data-member / {
            match($0, /layout-offset-in-bits='\''[0-9]+'\''/)
            offset = substr($0, RSTART + 23, RLENGTH - 24) + 0
            dropping = (offset >= bits)
        }
        inside && /<\/class-decl>/ { inside = 0 }
        !dropping { print }
        dropping && /<\/data-member>/ { dropping = 0 }
    ' "$3"
}

# Size in bits of struct $1 in description $2 (the first definition).
struct_bits() {
    grep -o "<class-decl name='$1' size-in-bits='[0-9]*'" "$2" | head -n 1 |
        sed "s/.*size-in-bits='\([0-9]*\)'/\1/"
}

mode=${1:-}
case $mode in
dump)
    [ $# -eq 3 ] || { echo "usage: $0 dump LIBRARY OUT.xml" >&2; exit 2; }
    abi_dump "$2" "$3"
    echo "check-abi: wrote the ABI of $2 to $3"
    ;;
check)
    [ $# -eq 5 ] || { echo "usage: $0 check LIBRARY BASELINE.xml SUPPRESSIONS WORKDIR" >&2; exit 2; }
    lib=$2 baseline=$3 supp=$4 work=$5
    mkdir -p "$work"
    current=$work/current.xml
    abi_dump "$lib" "$current"

    if ! abidiff --suppressions "$supp" "$baseline" "$current" >"$work/abidiff.txt" 2>&1; then
        cat "$work/abidiff.txt" >&2
        echo "check-abi: $lib is not ABI-compatible with $baseline (see above)." >&2
        echo "check-abi: 1.x may only append fields to extensible structs and add functions under" >&2
        echo "check-abi: a new MEMRA_1.N node; anything else needs a major version (abi/README.md)." >&2
        exit 1
    fi

    without_type_waivers "$supp" >"$work/prefix.supp"
    cp "$current" "$work/prefix.xml"
    for name in $(extensible_structs "$supp"); do
        old_bits=$(struct_bits "$name" "$baseline")
        new_bits=$(struct_bits "$name" "$current")
        if [ -z "$old_bits" ] || [ -z "$new_bits" ]; then
            echo "check-abi: struct $name (named in $supp) is missing from the baseline or the library" >&2
            exit 1
        fi
        if [ "$new_bits" -gt "$old_bits" ]; then
            truncate_struct "$name" "$old_bits" "$work/prefix.xml" >"$work/prefix.tmp"
            mv "$work/prefix.tmp" "$work/prefix.xml"
        fi
    done
    if ! abidiff --suppressions "$work/prefix.supp" "$baseline" "$work/prefix.xml" \
        >"$work/abidiff-prefix.txt" 2>&1; then
        cat "$work/abidiff-prefix.txt" >&2
        echo "check-abi: an extensible struct changed within its baseline size (above: the library" >&2
        echo "check-abi: with the appended members cut off); fields may only be appended." >&2
        exit 1
    fi
    echo "check-abi: $lib is ABI-compatible with $baseline"
    ;;
*)
    echo "usage: $0 dump LIBRARY OUT.xml | check LIBRARY BASELINE.xml SUPPRESSIONS WORKDIR" >&2
    exit 2
    ;;
esac
