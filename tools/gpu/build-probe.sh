#!/bin/sh
# Builds the CUDA engineer's probe (tools/device/probe.c) into BUILD/tools/probe against
# BUILD/libmemra.so; it links the CUDA runtime statically for its timing events, like the
# library, so it runs on the GPU machine next to the carried build folder.
#
# usage: tools/device/build-probe.sh [BUILD]    (default build-cuda)
set -eu
build=${1:-build-cuda}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$build/tools"
# $ORIGIN is for the dynamic linker, not the shell.
# shellcheck disable=SC2016
${CC:-gcc} -std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -Iabi -I"$cuda/include" \
    tools/device/probe.c -o "$build/tools/probe" "$build/libmemra.so" \
    -L"$cuda/lib64" -lcudart_static -ldl -lrt -lpthread -lm -Wl,-rpath,'$ORIGIN/..'
echo "built $build/tools/probe"
