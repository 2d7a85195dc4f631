/*
 * The JSON reader of json.h: recursive descent over the text, one allocation per string and
 * per array or object.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define BJ_MAX_DEPTH 64

typedef struct parser {
    const char *s, *p;
    char *err;
    size_t err_len;
    int depth;
} parser;

static int fail(parser *x, const char *what)
{
    size_t line = 1;
    for (const char *q = x->s; q < x->p; q++)
        line += *q == '\n';
    snprintf(x->err, x->err_len, "line %zu: %s", line, what);
    return -1;
}

static void skip_ws(parser *x)
{
    while (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r')
        x->p++;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9')
            v |= (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            v |= (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            v |= (unsigned)(ch - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xc0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xe0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        dst[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    dst[0] = (char)(0xf0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    dst[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string literal at x->p (the opening quote) into a new allocation. An escape never makes
 * the text longer than its source, so the source length bounds the allocation. */
static int parse_string(parser *x, char **out)
{
    const char *start = ++x->p;
    size_t cap = 1;
    while (*x->p && *x->p != '"') {
        if (*x->p == '\\' && x->p[1])
            x->p++;
        x->p++;
        cap++;
    }
    if (*x->p != '"')
        return fail(x, "unterminated string");
    cap += (size_t)(x->p - start);
    char *buf = malloc(cap), *d = buf;
    if (buf == NULL)
        return fail(x, "out of memory");
    for (const char *q = start; q < x->p; q++) {
        unsigned char ch = (unsigned char)*q;
        if (ch < 0x20) {
            free(buf);
            return fail(x, "control character in a string");
        }
        if (ch != '\\') {
            *d++ = (char)ch;
            continue;
        }
        q++;
        switch (*q) {
        case '"':
        case '\\':
        case '/':
            *d++ = *q;
            break;
        case 'b':
            *d++ = '\b';
            break;
        case 'f':
            *d++ = '\f';
            break;
        case 'n':
            *d++ = '\n';
            break;
        case 'r':
            *d++ = '\r';
            break;
        case 't':
            *d++ = '\t';
            break;
        case 'u': {
            unsigned cp, lo;
            if (x->p - q < 5 || hex4(q + 1, &cp) != 0) {
                free(buf);
                return fail(x, "bad \\u escape");
            }
            q += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && x->p - q >= 7 && q[1] == '\\' && q[2] == 'u' &&
                hex4(q + 3, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                q += 6;
            }
            d += put_utf8(d, cp);
            break;
        }
        default:
            free(buf);
            return fail(x, "bad escape in a string");
        }
    }
    *d = '\0';
    x->p++;
    *out = buf;
    return 0;
}

static int parse_value(parser *x, bj_value *v);

/* Appends one item to an array or object under construction. */
static int push(parser *x, bj_value *v, size_t *cap, char *key)
{
    if (v->n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 8;
        bj_value *items = realloc(v->items, ncap * sizeof *items);
        if (items == NULL)
            return fail(x, "out of memory");
        v->items = items;
        if (v->type == BJ_OBJ) {
            char **keys = realloc(v->keys, ncap * sizeof *keys);
            if (keys == NULL)
                return fail(x, "out of memory");
            v->keys = keys;
        }
        *cap = ncap;
    }
    memset(&v->items[v->n], 0, sizeof v->items[v->n]);
    if (v->type == BJ_OBJ)
        v->keys[v->n] = key;
    v->n++;
    return 0;
}

static int parse_container(parser *x, bj_value *v, bool object)
{
    size_t cap = 0;
    char close = object ? '}' : ']';
    v->type = object ? BJ_OBJ : BJ_ARR;
    if (++x->depth > BJ_MAX_DEPTH)
        return fail(x, "nested too deeply");
    x->p++;
    skip_ws(x);
    if (*x->p == close) {
        x->p++;
        x->depth--;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(x);
        if (object) {
            if (*x->p != '"')
                return fail(x, "expected a key");
            if (parse_string(x, &key) != 0)
                return -1;
            skip_ws(x);
            if (*x->p != ':') {
                free(key);
                return fail(x, "expected ':'");
            }
            x->p++;
        }
        if (push(x, v, &cap, key) != 0) {
            free(key);
            return -1;
        }
        if (parse_value(x, &v->items[v->n - 1]) != 0)
            return -1;
        skip_ws(x);
        if (*x->p == ',') {
            x->p++;
            continue;
        }
        if (*x->p == close) {
            x->p++;
            x->depth--;
            return 0;
        }
        return fail(x, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

/* The literal `word` (true, false or null) at x->p, read as a value of `type`. */
static int parse_literal(parser *x, bj_value *v, const char *word, bj_type type, bool b)
{
    const size_t n = strlen(word);
    if (strncmp(x->p, word, n) != 0)
        return fail(x, "bad literal");
    v->type = type;
    if (b)
        v->b = true;
    x->p += n;
    return 0;
}

static int parse_value(parser *x, bj_value *v)
{
    skip_ws(x);
    memset(v, 0, sizeof *v);
    switch (*x->p) {
    case '{':
        return parse_container(x, v, true);
    case '[':
        return parse_container(x, v, false);
    case '"':
        v->type = BJ_STR;
        return parse_string(x, &v->str);
    case 't':
        return parse_literal(x, v, "true", BJ_BOOL, true);
    case 'f':
        return parse_literal(x, v, "false", BJ_BOOL, false);
    case 'n':
        return parse_literal(x, v, "null", BJ_NULL, false);
    default: {
        char *end;
        if (*x->p != '-' && (*x->p < '0' || *x->p > '9'))
            return fail(x, "unexpected character");
        errno = 0;
        v->num = strtod(x->p, &end);
        if (end == x->p || errno == ERANGE)
            return fail(x, "bad number");
        v->type = BJ_NUM;
        x->p = end;
        return 0;
    }
    }
}

int bj_parse(const char *text, bj_value *out, char *err, size_t err_len)
{
    parser x = {text, text, err, err_len, 0};
    if (parse_value(&x, out) != 0) {
        bj_free(out);
        return -1;
    }
    skip_ws(&x);
    if (*x.p != '\0') {
        fail(&x, "text after the value");
        bj_free(out);
        return -1;
    }
    return 0;
}

void bj_free(bj_value *v)
{
    if (v == NULL)
        return;
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        bj_free(&v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

const bj_value *bj_get(const bj_value *v, const char *key)
{
    if (v == NULL || v->type != BJ_OBJ)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

double bj_num(const bj_value *v, const char *key, double def)
{
    const bj_value *m = bj_get(v, key);
    return m != NULL && m->type == BJ_NUM ? m->num : def;
}

const char *bj_str(const bj_value *v, const char *key, const char *def)
{
    const bj_value *m = bj_get(v, key);
    return m != NULL && m->type == BJ_STR ? m->str : def;
}

bool bj_bool(const bj_value *v, const char *key, bool def)
{
    const bj_value *m = bj_get(v, key);
    return m != NULL && m->type == BJ_BOOL ? m->b : def;
}
