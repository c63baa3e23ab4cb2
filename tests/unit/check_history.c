/* Unit tests of src/model/history.c: interning and the deep copy the UI and exporters take.
 * The clone must stay valid after the original is freed (under ASan a dangling string pointer
 * is a use-after-free report, not a lucky read). */
#include "ranktop/history.h"
#include "tsupport.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static void fill(struct history *h)
{
    const struct hframe a[] = {{"leaf", "/x/a.py", 3, false},
                               {"mid", "/x/a.py", 10, false},
                               {"main", "/x/m.py", 1, false}};
    const struct hframe b[] = {{"other", "/x/b.py", 7, false}, {"main", "/x/m.py", 1, false}};
    struct hrank *r = history_rank(h, 100, 0, "gpu 0");
    struct hthread *t = history_thread(r, 1, 100, "MainThread", true);

    history_observe(t, history_intern_stack(h, a, 3), 10);
    history_observe(t, history_intern_stack(h, b, 2), 20);
    history_counter(h, SERIES_RSS, NULL, 100, 10, 12.5);
}

START_TEST(test_intern_dedups)
{
    struct history h;
    const struct hframe a[] = {{"f", "/x/a.py", 1, false}};
    const struct hframe a2[] = {{"f", "/x/a.py", 1, false}};
    const struct hframe b[] = {{"f", "/x/a.py", 2, false}};

    history_init(&h, 0, 0, "host");
    ck_assert_uint_eq(history_intern_stack(&h, a, 1), history_intern_stack(&h, a2, 1));
    ck_assert_uint_ne(history_intern_stack(&h, a, 1), history_intern_stack(&h, b, 1));
    ck_assert_uint_eq(h.nframes, 2);
    /* Equal strings are interned once: both frames share the pointers. */
    ck_assert_ptr_eq(h.frames[0].function, h.frames[1].function);
    history_fini(&h);
}
END_TEST

/* A native frame is never the Python frame of the same name, file and line, and a clone keeps
 * the mark (exports and views show it). */
START_TEST(test_native_frames_distinct)
{
    struct history h, c;
    const struct hframe py[] = {{"pause", "/lib/libc.so.6", 0, false}};
    const struct hframe nat[] = {{"pause", "/lib/libc.so.6", 0, true}};
    uint32_t a, b;

    history_init(&h, 0, 0, "host");
    a = history_intern_stack(&h, py, 1);
    b = history_intern_stack(&h, nat, 1);
    ck_assert_uint_ne(a, b);
    ck_assert_uint_eq(history_intern_stack(&h, nat, 1), b);
    history_clone(&h, &c);
    ck_assert(!c.frames[history_stack_frames(&c, a)[0]].native);
    ck_assert(c.frames[history_stack_frames(&c, b)[0]].native);
    history_fini(&c);
    history_fini(&h);
}
END_TEST

/* A stack interned from frame ids (the sampler keeps the ids of unchanged outer frames) is
 * the stack interned from its frames. */
START_TEST(test_intern_by_ids)
{
    struct history h;
    const struct hframe inner_first[] = {{"leaf", "/x/a.py", 3, false},
                                         {"mid", "/x/a.py", 10, false},
                                         {"main", "/x/m.py", 1, false}};
    uint32_t ids[3], a, b;

    history_init(&h, 0, 0, "host");
    a = history_intern_stack(&h, inner_first, 3);
    for (int i = 0; i < 3; i++)
        ids[i] = history_intern_frame(&h, &inner_first[2 - i]);
    b = history_intern_stack_ids(&h, ids, 3);
    ck_assert_uint_eq(a, b);
    ck_assert_uint_eq(h.nstacks, 1);
    ck_assert_uint_ne(history_intern_stack_ids(&h, ids, 2), a);
    history_fini(&h);
}
END_TEST

START_TEST(test_clone_outlives_original)
{
    struct history h, c, cc;

    history_init(&h, 0, 0, "host");
    fill(&h);
    history_clone(&h, &c);
    history_fini(&h);

    ck_assert_uint_eq(c.nframes, 4);
    ck_assert_uint_eq(c.nstacks, 2);
    ck_assert_str_eq(c.frames[history_stack_frames(&c, 0)[2]].function, "leaf");
    ck_assert_str_eq(c.frames[history_stack_frames(&c, 0)[0]].file, "/x/m.py");
    ck_assert_str_eq(c.frames[history_stack_frames(&c, 1)[1]].function, "other");
    ck_assert_int_eq(c.frames[history_stack_frames(&c, 1)[1]].line, 7);
    ck_assert_str_eq(c.ranks[0].threads[0].name, "MainThread");
    ck_assert_uint_eq(c.ranks[0].threads[0].nruns, 2);
    ck_assert_uint_eq(c.series[0].n, 1);
    ck_assert_ptr_nonnull(history_series(&c, SERIES_RSS, 100));
    /* Frames 1 and 2 (mid, leaf) share their interned file. */
    ck_assert_ptr_eq(c.frames[1].file, c.frames[2].file);
    ck_assert_uint_gt(history_memory(&c), 0);

    /* A clone of a clone is as independent. */
    history_clone(&c, &cc);
    history_fini(&c);
    ck_assert_str_eq(cc.frames[history_stack_frames(&cc, 1)[0]].function, "main");
    history_fini(&cc);
}
END_TEST

static Suite *history_suite(void)
{
    Suite *s = suite_create("history");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_intern_dedups);
    tcase_add_test(tc, test_native_frames_distinct);
    tcase_add_test(tc, test_intern_by_ids);
    tcase_add_test(tc, test_clone_outlives_original);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(history_suite());
}
