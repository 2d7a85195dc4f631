/*
 * A small JSON reader for bench.json files (compare.c): the whole text into a tree, RFC 8259
 * syntax, numbers as doubles, \uXXXX escapes decoded to UTF-8. Not a general-purpose library:
 * no streaming, nesting up to 64 levels.
 */
#ifndef MEMRA_BENCH_JSON_H
#define MEMRA_BENCH_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum bj_type { BJ_NULL, BJ_BOOL, BJ_NUM, BJ_STR, BJ_ARR, BJ_OBJ } bj_type;

typedef struct bj_value {
    bj_type type;
    bool b;
    double num;
    char *str;              /* BJ_STR */
    size_t n;               /* BJ_ARR, BJ_OBJ: number of items */
    struct bj_value *items; /* BJ_ARR, BJ_OBJ */
    char **keys;            /* BJ_OBJ: the key of each item */
} bj_value;

/* Parses `text` into `*out`. Returns 0, or -1 with a message naming the line in `err`. */
int bj_parse(const char *text, bj_value *out, char *err, size_t err_len);
void bj_free(bj_value *v);

/* The member `key` of object `v`, or NULL (also when `v` is NULL or not an object). */
const bj_value *bj_get(const bj_value *v, const char *key);
/* The member's number, string or boolean, or `def` when absent or of another type. */
double bj_num(const bj_value *v, const char *key, double def);
const char *bj_str(const bj_value *v, const char *key, const char *def);
bool bj_bool(const bj_value *v, const char *key, bool def);

#endif /* MEMRA_BENCH_JSON_H */
