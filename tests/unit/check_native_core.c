/* native_core_unwind (collectors/native/core.c) on a real core: tests/unit/core/abort_prog.c,
 * built for this build's machine and run under qemu-user until it aborts, leaves a core that
 * qemu writes; unwound with the live unwinder's accessors, register mapping and table search,
 * its frames include inner, outer and main, in that order, named from the program's own
 * symbols (nm -S). Then a truncated core and a file that is no core are refused, not crashed
 * on. Run in the aarch64 cross build (under qemu-user, where ptrace does not exist: the only
 * place aarch64 unwinding runs). Arguments: CORE PROGRAM SYMS. Single-threaded. */
#include "ranktop/native/native.h"
#include "tsupport.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *core_path, *prog_path, *syms_path;

struct sym {
    uint64_t v, sz;
    char name[64];
};

static struct sym syms[8192];
static size_t nsyms;

/* The program's function symbols (nm -S lines: value size type name), read once. */
static void load_syms(void)
{
    char line[512];
    FILE *f = fopen(syms_path, "r");

    ck_assert_ptr_nonnull(f);
    while (nsyms < sizeof(syms) / sizeof(syms[0]) && fgets(line, sizeof(line), f)) {
        struct sym *y = &syms[nsyms];
        char type;

        if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %63s", &y->v, &y->sz, &type, y->name) == 4 &&
            (type == 'T' || type == 't' || type == 'W'))
            nsyms++;
    }
    fclose(f);
}

/* The function covering addr, or "?". */
static const char *name_of(uint64_t addr)
{
    for (size_t i = 0; i < nsyms; i++)
        if (addr >= syms[i].v && addr - syms[i].v < syms[i].sz)
            return syms[i].name;
    return "?";
}

START_TEST(test_unwind_core)
{
    struct native_stack st;
    struct app_err err = {0};
    char names[2048] = "";
    int rc = native_core_unwind(core_path, prog_path, &st, &err);

    ck_assert_msg(rc == 0, "native_core_unwind: %s", err.msg);
    load_syms();
    for (size_t i = 0; i < st.n; i++) {
        /* A return address can be the first byte after its call's function (abort() does
         * not return): the call is the byte before it. */
        const char *fn = name_of(i ? st.frames[i].ip - 1 : st.frames[i].ip);

        strncat(names, fn, sizeof(names) - strlen(names) - 2);
        strcat(names, " ");
    }
    printf("core frames: %s\n", names);
    ck_assert_msg(strstr(names, " inner outer main "), "frames: %s", names);
    ck_assert_msg(strstr(names, "abort "), "frames: %s", names);
    native_stack_fini(&st);
}
END_TEST

/* The first n bytes of the core, in a file of their own. */
static void write_prefix(const char *to, size_t n)
{
    FILE *in = fopen(core_path, "rb"), *out = fopen(to, "wb");
    char *buf = malloc(n ? n : 1);

    ck_assert(in && out && buf);
    ck_assert_uint_eq(fread(buf, 1, n, in), n);
    ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    free(buf);
}

START_TEST(test_bad_cores)
{
    char path[] = "/tmp/check_native_core_XXXXXX";
    int fd = mkstemp(path);
    size_t cuts[] = {0, 16, 64, 100, 600, 4096};
    struct native_stack st;
    struct app_err err = {0};

    ck_assert_int_ge(fd, 0);
    close(fd);
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        write_prefix(path, cuts[i]); /* headers or notes cut off: refused */
        ck_assert_int_lt(native_core_unwind(path, prog_path, &st, &err), 0);
        ck_assert_uint_eq(st.n, 0);
    }
    /* the program is no core, and the core is no program */
    ck_assert_int_lt(native_core_unwind(prog_path, prog_path, &st, &err), 0);
    ck_assert_int_lt(native_core_unwind(core_path, core_path, &st, &err), 0);
    unlink(path);
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("native_core");
    TCase *tc = tcase_create("core");

    if (argc != 4) {
        fprintf(stderr, "usage: %s CORE PROGRAM SYMS\n", argv[0]);
        return 2;
    }
    core_path = argv[1];
    prog_path = argv[2];
    syms_path = argv[3];
    tcase_add_test(tc, test_unwind_core);
    tcase_add_test(tc, test_bad_cores);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
