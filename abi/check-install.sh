#!/bin/sh
# Steps of `make abi-install-check` (mk/abi.mk runs `make install` / `make uninstall` between
# them):
#
#   prepare   ROOT LISTING    make ROOT/{lib,lib/pkgconfig,include} holding a file of someone
#                             else's each, and record the tree in LISTING
#   installed PREFIX LISTING LIBRARY VERSION WORKDIR
#                             exactly the five files were added under PREFIX (lib/, include/,
#                             lib/pkgconfig/), with the right contents and links; then build
#                             tests/abi_consumer.c with only `pkg-config --cflags --libs memra`
#                             and memra.pc's `rpath` flag, check it links to libmemra.so.MAJOR
#                             of that prefix, and run it without LD_LIBRARY_PATH
#   staged    DESTDIR PREFIX LISTING LIBRARY VERSION
#                             a DESTDIR install put the same five files under DESTDIR/PREFIX and
#                             its memra.pc names PREFIX, not DESTDIR
#   unchanged ROOT LISTING    the tree is again exactly what LISTING recorded
#
# CC and PKG_CONFIG are taken from the environment.
set -eu

cc=${CC:-cc}
pkg_config=${PKG_CONFIG:-pkg-config}

die() {
    echo "check-install: $*" >&2
    exit 1
}

# Every path under $1 with its kind and, for links, the target: a full picture of the tree.
listing() {
    (cd "$1" && find . \( -type l -printf '%y %p -> %l\n' \) -o -printf '%y %p\n' | sort)
}

# The five installed paths relative to the prefix, and their checks.
check_tree() {
    root=$1 version=$2 lib=$3
    major=${version%%.*}
    real=$root/lib/libmemra.so.$version
    if [ ! -f "$real" ] || [ -L "$real" ]; then
        die "$real is missing or not a regular file"
    fi
    [ -x "$real" ] || die "$real is not executable"
    cmp -s "$real" "$lib" || die "$real differs from the built $lib"
    [ "$(readlink "$root/lib/libmemra.so.$major")" = "libmemra.so.$version" ] ||
        die "$root/lib/libmemra.so.$major should link to libmemra.so.$version"
    [ "$(readlink "$root/lib/libmemra.so")" = "libmemra.so.$major" ] ||
        die "$root/lib/libmemra.so should link to libmemra.so.$major"
    cmp -s "$root/include/memra.h" abi/memra.h || die "$root/include/memra.h differs from abi/memra.h"
    [ -f "$root/lib/pkgconfig/memra.pc" ] || die "$root/lib/pkgconfig/memra.pc is missing"
}

# The tree under $1 minus the listing $2 must be exactly the five installed paths.
check_added() {
    root=$1 before=$2 version=$3
    major=${version%%.*}
    listing "$root" >"$before.after"
    comm -13 "$before" "$before.after" >"$before.added"
    cat >"$before.expected" <<EOF
f ./include/memra.h
f ./lib/libmemra.so.$version
f ./lib/pkgconfig/memra.pc
l ./lib/libmemra.so -> libmemra.so.$major
l ./lib/libmemra.so.$major -> libmemra.so.$version
EOF
    sort -o "$before.expected" "$before.expected"
    if ! diff -u "$before.expected" "$before.added" >&2; then
        die "install added other paths than the five expected (diff above: - expected, + added)"
    fi
    if [ -n "$(comm -23 "$before" "$before.after")" ]; then
        die "install removed or changed: $(comm -23 "$before" "$before.after" | tr '\n' ' ')"
    fi
}

mode=${1:-}
case $mode in
prepare)
    [ $# -eq 3 ] || die "usage: $0 prepare ROOT LISTING"
    root=$2
    mkdir -p "$root/lib/pkgconfig" "$root/include"
    echo "not libmemra's" >"$root/lib/libother.so.1"
    echo "not libmemra's" >"$root/lib/pkgconfig/other.pc"
    echo "not libmemra's" >"$root/include/other.h"
    listing "$root" >"$3"
    ;;
installed)
    [ $# -eq 6 ] || die "usage: $0 installed PREFIX LISTING LIBRARY VERSION WORKDIR"
    prefix=$2 before=$3 lib=$4 version=$5 work=$6
    libdir=$prefix/lib includedir=$prefix/include
    major=${version%%.*}
    check_added "$prefix" "$before" "$version"
    check_tree "$prefix" "$version" "$lib"

    PKG_CONFIG_PATH=$libdir/pkgconfig
    export PKG_CONFIG_PATH
    [ "$("$pkg_config" --modversion memra)" = "$version" ] ||
        die "pkg-config --modversion memra is '$("$pkg_config" --modversion memra)', expected $version"
    [ "$("$pkg_config" --variable=prefix memra)" = "$prefix" ] ||
        die "memra.pc: prefix is '$("$pkg_config" --variable=prefix memra)', expected $prefix"
    flags=$("$pkg_config" --cflags --libs memra)
    echo "check-install: pkg-config --cflags --libs memra: $flags"
    for want in "-I$includedir" "-L$libdir"; do
        case " $flags " in
        *" $want "*) ;;
        *) die "pkg-config flags '$flags' lack $want" ;;
        esac
    done

    # The run path flag memra.pc offers, which `make install` names for such a prefix.
    rpath=$("$pkg_config" --variable=rpath memra)
    [ "$rpath" = "-Wl,-rpath,$libdir" ] ||
        die "memra.pc: rpath is '$rpath', expected -Wl,-rpath,$libdir"
    hint=$(abi/loader-hint.sh "$libdir")
    case $hint in
    *"-Wl,-rpath,$libdir"*) ;;
    *) die "abi/loader-hint.sh $libdir does not name the run path flag: $hint" ;;
    esac

    mkdir -p "$work"
    # shellcheck disable=SC2086 # $cc and $flags are word lists
    $cc -std=c11 -Wall -Wextra -Werror -pedantic tests/abi_consumer.c $flags $rpath -lm \
        -o "$work/abi_consumer"
    needed=$(readelf -d "$work/abi_consumer" | sed -n 's/.*(NEEDED).*\[\(libmemra[^]]*\)\]$/\1/p')
    [ "$needed" = "libmemra.so.$major" ] ||
        die "the consumer needs '$needed', expected libmemra.so.$major (the SONAME)"
    # No LD_LIBRARY_PATH: the consumer must find the library the way a user's program does.
    resolved=$(env -u LD_LIBRARY_PATH ldd "$work/abi_consumer" |
        sed -n "s/^[[:space:]]*libmemra.so.$major => \([^ ]*\) .*/\1/p")
    [ "$resolved" = "$libdir/libmemra.so.$major" ] ||
        die "the consumer loads libmemra from '$resolved', expected $libdir/libmemra.so.$major"
    env -u LD_LIBRARY_PATH "$work/abi_consumer" || die "the consumer failed (status $?)"
    ;;
staged)
    [ $# -eq 6 ] || die "usage: $0 staged DESTDIR PREFIX LISTING LIBRARY VERSION"
    destdir=$2 prefix=$3 before=$4 lib=$5 version=$6
    root=$destdir$prefix
    check_added "$root" "$before" "$version"
    check_tree "$root" "$version" "$lib"
    grep -qx "prefix=$prefix" "$root/lib/pkgconfig/memra.pc" ||
        die "$root/lib/pkgconfig/memra.pc does not say prefix=$prefix"
    if grep -q "$destdir" "$root/lib/pkgconfig/memra.pc"; then
        die "$root/lib/pkgconfig/memra.pc mentions DESTDIR $destdir"
    fi
    # pkg-config's sysroot support is how a cross or staged build consumes such a tree.
    flags=$(PKG_CONFIG_PATH=$root/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$destdir \
        "$pkg_config" --cflags --libs memra)
    for want in "-I$root/include" "-L$root/lib"; do
        case " $flags " in
        *" $want "*) ;;
        *) die "staged pkg-config flags '$flags' lack $want" ;;
        esac
    done
    ;;
unchanged)
    [ $# -eq 3 ] || die "usage: $0 unchanged ROOT LISTING"
    if ! listing "$2" | diff -u "$3" - >&2; then
        die "uninstall did not restore $2 exactly (diff above: - before install, + after uninstall)"
    fi
    ;;
*)
    die "usage: $0 prepare|installed|staged|unchanged ..."
    ;;
esac
