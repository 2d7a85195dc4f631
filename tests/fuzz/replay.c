/*
 * Runs the fuzz target (fuzz_abi.c) once over each file named on the command line, without
 * libFuzzer and without sanitizers, so that the corpus also replays against the plain library:
 * under valgrind, and with another allocator preloaded. A check that depends on what the
 * allocator leaves in freed memory (glibc's free() overwrites the first bytes of a block,
 * jemalloc's does not, valgrind's never hands it out again soon) passes with one allocator and
 * fails with another: these runs give it the others.
 *
 * usage: fuzz_replay FILE...
 * Exits 0 after the last input; an input the harness finds wrong aborts the process.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            fprintf(stderr, "fuzz_replay: cannot open %s\n", argv[i]);
            return 2;
        }
        uint8_t *data = NULL;
        size_t size = 0, cap = 0;
        for (;;) {
            if (size == cap) {
                cap = cap ? 2 * cap : 4096;
                uint8_t *grown = realloc(data, cap);
                if (grown == NULL) {
                    fprintf(stderr, "fuzz_replay: out of memory reading %s\n", argv[i]);
                    return 2;
                }
                data = grown;
            }
            size_t got = fread(data + size, 1, cap - size, f);
            size += got;
            if (got == 0)
                break;
        }
        fclose(f);
        (void)LLVMFuzzerTestOneInput(data, size);
        free(data);
    }
    printf("fuzz_replay: %d inputs replayed\n", argc - 1);
    return 0;
}
