/* The locals renderer (pyrepr.c) on memory images of 3.12 objects: well-formed values render
 * as Python's repr does, and hostile ones (lengths past their storage, ints that are not
 * normalised, digits out of range, types without a readable name, pointers into nothing, a
 * list that holds itself, random bytes) render as unreadable or bounded, never crash and never
 * read without bound. */
#include "abi/pyabi.h"
#include "pyrepr.h"
#include "ranktop/proc/rmem.h"
#include "tsupport.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE 0x100000ull

/* A little heap of objects in one image region. */
struct heap {
    struct rmem *m;
    uint8_t mem[1 << 16];
    uint64_t top;
    uint64_t t_int, t_str, t_list, t_tuple, t_none, t_float, t_heap, t_noname;
};

static uint64_t alloc(struct heap *h, size_t n)
{
    uint64_t a = BASE + h->top;

    h->top += (n + 15) & ~(size_t)15;
    ck_assert_uint_lt(h->top, sizeof(h->mem));
    return a;
}

static void put64(struct heap *h, uint64_t addr, uint64_t v)
{
    memcpy(h->mem + (addr - BASE), &v, 8);
}

static void put32(struct heap *h, uint64_t addr, uint32_t v)
{
    memcpy(h->mem + (addr - BASE), &v, 4);
}

static uint64_t type_new(struct heap *h, const char *name, uint64_t flags)
{
    uint64_t t = alloc(h, 176), s = alloc(h, strlen(name) + 1);

    memcpy(h->mem + (s - BASE), name, strlen(name) + 1);
    put64(h, t + 24, s);
    put64(h, t + PYABI_TP_FLAGS, flags | PYABI_TPF_READY);
    return t;
}

static uint64_t obj_new(struct heap *h, uint64_t type, size_t n)
{
    uint64_t o = alloc(h, n);

    put64(h, o, 1);
    put64(h, o + 8, type);
    return o;
}

/* 3.12 ints: lv_tag = ndigits << 3 | sign (0 positive, 1 zero, 2 negative). */
static uint64_t int_new(struct heap *h, const uint32_t *d, size_t n, int sign)
{
    uint64_t o = obj_new(h, h->t_int, 24 + 4 * (n ? n : 1));

    put64(h, o + 16, (uint64_t)n << 3 | (uint64_t)(n ? sign : 1));
    for (size_t i = 0; i < n; i++)
        put32(h, o + 24 + 4 * i, d[i]);
    return o;
}

static uint64_t str_new(struct heap *h, const char *s)
{
    uint64_t o = obj_new(h, h->t_str, 40 + strlen(s) + 1);

    put64(h, o + 16, strlen(s));
    put32(h, o + 32, (1u << 2) | (1u << 5) | (1u << 6)); /* kind 1, compact, ascii */
    memcpy(h->mem + (o + 40 - BASE), s, strlen(s) + 1);
    return o;
}

static uint64_t list_new(struct heap *h, const uint64_t *it, int64_t n, int64_t alloc_n)
{
    uint64_t o = obj_new(h, h->t_list, 40), arr = alloc(h, 8 * (size_t)(alloc_n ? alloc_n : 1));

    put64(h, o + 16, (uint64_t)n);
    put64(h, o + 24, arr);
    put64(h, o + 32, (uint64_t)alloc_n);
    for (int64_t i = 0; i < n && i < alloc_n; i++)
        put64(h, arr + 8 * (uint64_t)i, it[i]);
    return o;
}

static struct heap *heap_new(void)
{
    struct heap *h = calloc(1, sizeof(*h));

    h->t_int = type_new(h, "int", 0);
    h->t_str = type_new(h, "str", 0);
    h->t_list = type_new(h, "list", 0);
    h->t_tuple = type_new(h, "tuple", 0);
    h->t_none = type_new(h, "NoneType", 0);
    h->t_float = type_new(h, "float", 0);
    h->t_heap = type_new(h, "int", PYABI_TPF_HEAPTYPE); /* a class named int */
    h->t_noname = alloc(h, 176);
    put64(h, h->t_noname + 24, 0xdead0000); /* tp_name into nothing */
    put64(h, h->t_noname + PYABI_TP_FLAGS, PYABI_TPF_READY);
    return h;
}

/* Renders obj from a fresh image of the heap; returns the status, repr in out. */
static int show(struct heap *h, uint64_t obj, char *out, size_t len)
{
    struct pyrepr r;
    char *type, *repr;
    int st;

    h->m = rmem_new_image();
    rmem_image_add(h->m, BASE, h->mem, sizeof(h->mem));
    pyrepr_init(&r, h->m, &pyabi_for_minor(12)->layout);
    st = pyrepr_value(&r, obj, &type, &repr);
    snprintf(out, len, "%s", repr);
    free(type);
    free(repr);
    rmem_free(h->m);
    return st;
}

START_TEST(test_values)
{
    struct heap *h = heap_new();
    const uint32_t big[] = {0, 0, 0, 0, 0, 0, 1u << 20}; /* 2^200 */
    const uint32_t five[] = {5};
    uint64_t items[3], fl;
    double d = 0.1;
    char out[512];

    ck_assert_int_eq(show(h, int_new(h, big, 7, 0), out, sizeof(out)), 0);
    ck_assert_str_eq(out, "1606938044258990275541962092341162602522202993782792835301376");
    show(h, int_new(h, five, 1, 2), out, sizeof(out));
    ck_assert_str_eq(out, "-5");
    show(h, int_new(h, NULL, 0, 1), out, sizeof(out));
    ck_assert_str_eq(out, "0");
    fl = obj_new(h, h->t_float, 24);
    memcpy(h->mem + (fl + 16 - BASE), &d, 8);
    show(h, fl, out, sizeof(out));
    ck_assert_str_eq(out, "0.1");
    items[0] = str_new(h, "it's");
    items[1] = obj_new(h, h->t_none, 16);
    items[2] = int_new(h, five, 1, 0);
    show(h, list_new(h, items, 3, 4), out, sizeof(out));
    ck_assert_str_eq(out, "[\"it's\", None, 5]");
    /* A heap type that calls itself int is an object, not an int. */
    show(h, obj_new(h, h->t_heap, 32), out, sizeof(out));
    ck_assert(strncmp(out, "<int object at 0x", 17) == 0);
    free(h);
}
END_TEST

START_TEST(test_hostile)
{
    struct heap *h = heap_new();
    const uint32_t unnorm[] = {5, 0}, wide[] = {1u << 30};
    uint64_t self, arr, items[8] = {0};
    char out[512];

    /* A list longer than its storage, ints torn mid-update, a nameless type, bad pointers. */
    ck_assert_int_lt(show(h, list_new(h, items, 5, 2), out, sizeof(out)), 0);
    ck_assert(strncmp(out, "<unreadable", 11) == 0);
    ck_assert_int_lt(show(h, int_new(h, unnorm, 2, 0), out, sizeof(out)), 0);
    ck_assert_int_lt(show(h, int_new(h, wide, 1, 0), out, sizeof(out)), 0);
    ck_assert_int_lt(show(h, obj_new(h, h->t_noname, 16), out, sizeof(out)), 0);
    ck_assert_int_lt(show(h, 0xdead0000, out, sizeof(out)), 0);
    ck_assert_int_lt(show(h, BASE + 3, out, sizeof(out)), 0);
    /* A list that holds itself eight times: cut by depth and length, not followed forever. */
    self = list_new(h, items, 0, 8);
    put64(h, self + 16, 8);
    memcpy(&arr, h->mem + (self + 24 - BASE), 8);
    for (int i = 0; i < 8; i++)
        put64(h, arr + 8 * (uint64_t)i, self);
    ck_assert_int_eq(show(h, self, out, sizeof(out)), 0);
    ck_assert_uint_le(strlen(out), PYREPR_MAX + 3);
    ck_assert(strstr(out, "(8 items)") != NULL);
    free(h);
}
END_TEST

START_TEST(test_random_bytes)
{
    struct heap *h = heap_new();
    uint64_t seed = 12345;
    char out[512];

    /* Objects of every known type filled with random bytes (pointers often aimed back into
     * the heap): whatever they say, rendering ends, bounded. */
    for (int round = 0; round < 400; round++) {
        const uint64_t types[] = {h->t_int, h->t_str, h->t_list, h->t_tuple, h->t_float};
        uint64_t o = obj_new(h, types[round % 5], 64);
        for (int k = 16; k < 64; k += 8) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            put64(h, o + (uint64_t)k,
                  (seed >> 33) & 1 ? BASE + ((seed >> 8) % (h->top + 64) & ~7ull) : seed >> 20);
        }
        show(h, o, out, sizeof(out));
        ck_assert_uint_le(strlen(out), PYREPR_MAX + 3);
        if (h->top > sizeof(h->mem) - 4096)
            break;
    }
    free(h);
}
END_TEST

static Suite *pyrepr_suite(void)
{
    Suite *s = suite_create("pyrepr");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_values);
    tcase_add_test(tc, test_hostile);
    tcase_add_test(tc, test_random_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(pyrepr_suite());
}
