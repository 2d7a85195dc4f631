#!/bin/sh
# Builds the GPU probe (tools/gpu/probe.c) into BUILD/tools/probe against BUILD/libmemra.so. Like
# the library, it links the CUDA runtime statically (for its timing events), and it finds the
# library one folder up through an $ORIGIN run path, so BUILD can be copied to another machine
# and run there (tools/gpu/stage.sh makes such a copy).
#
# usage: tools/gpu/build-probe.sh [BUILD]    (default build-cuda; build the library first:
#        make BUILD=build-cuda lib)
#   CC         the C compiler (default gcc)
#   CUDA_HOME  the CUDA toolkit (default /usr/local/cuda)
set -eu
build=${1:-build-cuda}
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -e "$build/libmemra.so" ]; then
    echo "build-probe: $build/libmemra.so not found: run make BUILD=$build lib first" >&2
    exit 1
fi
mkdir -p "$build/tools"
# $ORIGIN is for the dynamic linker, not the shell.
# shellcheck disable=SC2016
${CC:-gcc} -std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -Iabi -I"$cuda/include" \
    tools/gpu/probe.c -o "$build/tools/probe" "$build/libmemra.so" \
    -L"$cuda/lib64" -lcudart_static -ldl -lrt -lpthread -lm -Wl,-rpath,'$ORIGIN/..'
echo "built $build/tools/probe"
