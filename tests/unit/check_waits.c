/* Unit tests of src/model/waits.c: the rules file parser (bad lines name FILE:LINE, comments,
 * the `builtin` line) and the classifier on synthetic frames and facts (the precedence of dead,
 * stopped, gc, frame rules, io, gil and host; frames innermost first; unknown stays unknown).
 * The built-in table, as embedded, must parse and classify the common waits. */
#include "ranktop/proc/procwait.h"
#include "ranktop/model/waits.h"
#include "tsupport.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct waits *parse_ok(const char *text)
{
    struct waits *w = NULL;
    struct app_err err = {0};
    int rc = waits_parse(text, strlen(text), "t.rules", &w, &err);

    ck_assert_msg(rc == 0, "parse failed: %s", err.msg);
    ck_assert_ptr_nonnull(w);
    return w;
}

/* Parses text expecting a failure whose message starts with want. */
static void parse_bad(const char *text, size_t len, const char *want)
{
    struct waits *w = (struct waits *)1;
    struct app_err err = {0};
    int rc = waits_parse(text, len, "t.rules", &w, &err);

    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_null(w);
    ck_assert_msg(!strncmp(err.msg, want, strlen(want)), "error '%s', want '%s...'", err.msg, want);
}

START_TEST(test_bad_lines)
{
    char longline[3000];
    const char nul[] = "data module a\ndata mod\0ule b\n";

    parse_bad("# ok\n\nwait module torch\n", 23, "t.rules:3: unknown kind 'wait'");
    parse_bad("stopped module torch\n", 21, "t.rules:1: 'stopped' comes from");
    parse_bad("dead func f\n", 12, "t.rules:1: 'dead' comes from");
    parse_bad("unknown func f\n", 15, "t.rules:1: unknown kind");
    parse_bad("data\n", 5, "t.rules:1: a rule is KIND");
    parse_bad("data module\n", 12, "t.rules:1: a rule is KIND");
    parse_bad("data module a func\n", 19, "t.rules:1: 'func' needs a pattern");
    parse_bad("data modul a\n", 13, "t.rules:1: unknown condition 'modul'");
    parse_bad("data func a func b\n", 19, "t.rules:1: 'func' given twice");
    parse_bad("data module torch.*\n", 20, "t.rules:1: module takes a dotted name");
    parse_bad("data module .torch\n", 19, "t.rules:1: module '.torch' is not");
    parse_bad("data module a..b\n", 17, "t.rules:1: module 'a..b' is not");
    parse_bad("device func f symbol s\n", 23, "t.rules:1: a rule is about a Python");
    parse_bad("\n\nbuiltin now\n", 14, "t.rules:3: 'builtin' stands alone");
    parse_bad(nul, sizeof(nul) - 1, "t.rules:2: a NUL byte");
    memset(longline, 'x', sizeof(longline));
    memcpy(longline, "data func ", 10);
    parse_bad(longline, sizeof(longline), "t.rules:1: line longer than");
}
END_TEST

START_TEST(test_comments_and_blank_lines)
{
    struct waits *w = parse_ok("# a comment\n"
                               "   \t\n"
                               "data module a.b   # trailing comment\r\n"
                               "  # indented comment\n"
                               "io func f#notacomment\n"
                               "device symbol cuda*"); /* no final newline */

    ck_assert_uint_eq(waits_count(w), 3);
    waits_free(w);
    w = parse_ok("");
    ck_assert_uint_eq(waits_count(w), 0);
    waits_free(w);
}
END_TEST

static enum wait_kind classify(const struct waits *w, const struct hframe *fr, size_t n, char *why)
{
    struct wait_facts f;

    wait_facts_init(&f);
    f.frames = fr;
    f.nframes = n;
    return waits_classify(w, &f, why, 200);
}

/* Innermost first: the frame the thread is in beats its callers; for one frame, file order. */
START_TEST(test_frames_innermost_first)
{
    struct waits *w = parse_ok("collective module torch.distributed\n"
                               "data module torch.utils.data\n"
                               "device func leaf\n"
                               "host func leaf\n");
    const struct hframe in_data[] = {
        {"get", "/usr/lib/python3.11/multiprocessing/queues.py", 100, false},
        {"_next_data", "/x/torch/utils/data/dataloader.py", 10, false},
        {"step", "/x/torch/distributed/fsdp/api.py", 5, false},
    };
    const struct hframe in_leaf[] = {
        {"leaf", "/x/train.py", 1, false},
        {"all_reduce", "/x/torch/distributed.py", 2, false},
    };
    char why[200];

    ck_assert_int_eq(classify(w, in_data, 3, why), WAIT_DATA);
    ck_assert_str_eq(why, "t.rules:2 module torch.utils.data: _next_data");
    ck_assert_int_eq(classify(w, in_data + 2, 1, why), WAIT_COLLECTIVE);
    ck_assert_int_eq(classify(w, in_leaf, 2, why), WAIT_DEVICE);
    ck_assert_str_eq(why, "t.rules:3 func leaf: leaf");
    ck_assert_int_eq(classify(w, in_leaf + 1, 1, why), WAIT_COLLECTIVE);
    waits_free(w);
}
END_TEST

START_TEST(test_module_file_func_match)
{
    struct waits *w = parse_ok("collective module torch.distributed\n"
                               "device module torch.cuda func *synchronize\n"
                               "data file */loader_*.py\n"
                               "gc module importlib\n");
    const struct hframe fr[] = {
        {"f", "/a/torch/distributedx/y.py", 1, false},  /* not the module */
        {"f", "/a/mytorch/distributed/y.py", 1, false}, /* not the module either */
        {"f", "torch/distributed/y.py", 1, false},      /* relative: is */
        {"Stream.synchronize", "/a/torch/cuda/streams.py", 1, false},
        {"synchronize", "/a/torch/cuda/__init__.py", 1, false},
        {"synchronizer", "/a/torch/cuda/__init__.py", 1, false},
        {"f", "/srv/loader_v2.py", 1, false},
        {"_find_and_load", "<frozen importlib._bootstrap>", 1, false},
        {"f", "<frozen importlibx>", 1, false},
    };
    const enum wait_kind want[] = {WAIT_HOST, WAIT_HOST, WAIT_COLLECTIVE, WAIT_DEVICE, WAIT_DEVICE,
                                   WAIT_HOST, WAIT_DATA, WAIT_GC,         WAIT_HOST};
    char why[200];

    for (size_t i = 0; i < sizeof(fr) / sizeof(fr[0]); i++)
        ck_assert_msg(classify(w, &fr[i], 1, why) == want[i], "frame %zu (%s %s): %s", i,
                      fr[i].function, fr[i].file, why);
    waits_free(w);
}
END_TEST

/* Native rules see only native frames, and a frame without a symbol has none to match. */
START_TEST(test_native_frames)
{
    struct waits *w = parse_ok("device symbol cuda*\n"
                               "collective object */libnccl.so*\n"
                               "data symbol *+0x*\n"
                               "data func cudaLaunch\n");
    const struct hframe fr[] = {
        {"cudaStreamSynchronize", "/usr/lib/libcudart.so.12", 0, true},
        {"cudaLaunch", "/x/a.py", 3, false},
        {"libnccl.so.2+0x1234", "/usr/lib/libnccl.so.2", 0, true},
        {"libfoo.so+0x10", "/usr/lib/libfoo.so", 0, true},
    };
    char why[200];

    ck_assert_int_eq(classify(w, &fr[0], 1, why), WAIT_DEVICE);
    ck_assert_int_eq(classify(w, &fr[1], 1, why), WAIT_DATA);
    ck_assert_int_eq(classify(w, &fr[2], 1, why), WAIT_COLLECTIVE);
    ck_assert_int_eq(classify(w, &fr[3], 1, why), WAIT_HOST);
    waits_free(w);
}
END_TEST

/* dead > stopped > gc > frames > io > gil > host > unknown. */
START_TEST(test_precedence)
{
    struct waits *w = parse_ok("collective func all_reduce\n");
    const struct hframe coll[] = {{"all_reduce", "/x/d.py", 1, false}};
    const struct hframe plain[] = {{"main", "/x/m.py", 1, false}};
    struct wait_facts f;
    char why[200];

    wait_facts_init(&f);
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_UNKNOWN);
    f.frames = coll;
    f.nframes = 1;
    f.state = 'D';
    f.syscall = SYS_read;
    f.holds_gil = 0;
    f.in_gc = 1;
    f.exited = true;
    f.exit_code = -1;
    f.exit_signal = 11;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_DEAD);
    ck_assert_str_eq(why, "signal 11 (SIGSEGV)");
    f.exited = false;
    f.state = 'T';
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_STOPPED);
    f.state = 't';
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_STOPPED);
    f.state = 'D';
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_GC);
    f.in_gc = 0;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_COLLECTIVE);
    f.frames = plain;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_IO);
    ck_assert_str_eq(why, "state D in read");
    f.state = 'S';
    f.wchan = "pipe_read";
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_IO);
    ck_assert_str_eq(why, "state S in read, wchan pipe_read");
    f.syscall = SYS_futex;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_GIL);
    f.holds_gil = -1;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_HOST);
    f.syscall = SYS_clock_nanosleep;
    f.holds_gil = 0;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_HOST);
    ck_assert_str_eq(why, "no rule matched; in clock_nanosleep");
    f.syscall = SYS_pselect6;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_IO);
    f.no_fds = true;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_HOST);
    ck_assert_str_eq(why, "no rule matched; in pselect6 over no descriptor (a sleep)");
    f.no_fds = false;
    /* No frames: the kernel's view still counts, and without it nothing is guessed. */
    f.nframes = 0;
    f.syscall = SYS_read;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_IO);
    f.syscall = -1;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_UNKNOWN);
    f.exited = true;
    f.exit_signal = 0;
    f.exit_code = 3;
    ck_assert_int_eq(waits_classify(w, &f, why, sizeof(why)), WAIT_DEAD);
    ck_assert_str_eq(why, "exit status 3");
    waits_free(w);
}
END_TEST

/* The embedded table parses and knows the common waits; `builtin` pulls it into a user file
 * after the file's own rules, which come first. */
START_TEST(test_builtin)
{
    const struct waits *b = waits_builtin();
    struct waits *w;
    const struct hframe ar[] = {
        {"all_reduce", "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 2,
         false},
        {"train", "/x/train.py", 1, false}};
    const struct hframe dl[] = {{"_MultiProcessingDataLoaderIter._next_data",
                                 "/v/site-packages/torch/utils/data/dataloader.py", 2, false}};
    const struct hframe sync[] = {{"synchronize", "/v/torch/cuda/__init__.py", 9, false}};
    const struct hframe nat[] = {{"__libc_recv", "/lib/libc.so.6", 0, true},
                                 {"gloo::transport::tcp::UnboundBuffer::waitRecv(int*, "
                                  "std::chrono::duration<long, std::ratio<1l, 1000l> >)",
                                  "/v/torch/lib/libtorch_cpu.so", 0, true}};
    const struct hframe gil[] = {{"take_gil", "/usr/bin/python3.11", 0, true}};
    char why[200];

    ck_assert_ptr_eq(b, waits_builtin());
    ck_assert_uint_gt(waits_count(b), 30);
    ck_assert_int_eq(classify(b, ar, 2, why), WAIT_COLLECTIVE);
    ck_assert_int_eq(classify(NULL, ar + 1, 1, why), WAIT_HOST);
    ck_assert_int_eq(classify(b, dl, 1, why), WAIT_DATA);
    ck_assert_int_eq(classify(b, sync, 1, why), WAIT_DEVICE);
    ck_assert_int_eq(classify(b, nat, 2, why), WAIT_COLLECTIVE);
    ck_assert_int_eq(classify(b, gil, 1, why), WAIT_GIL);
    w = parse_ok("host func train\nbuiltin\n");
    ck_assert_uint_eq(waits_count(w), waits_count(b) + 1);
    ck_assert_int_eq(classify(w, ar + 1, 1, why), WAIT_HOST);
    ck_assert_str_eq(why, "t.rules:1 func train: train");
    ck_assert_int_eq(classify(w, ar, 2, why), WAIT_COLLECTIVE);
    ck_assert_msg(!strncmp(why, "waits.rules:", 12), "%s", why);
    waits_free(w);
}
END_TEST

START_TEST(test_names_and_syscalls)
{
    ck_assert_str_eq(wait_kind_name(WAIT_GC), "gc");
    ck_assert_str_eq(wait_kind_name(WAIT_DEAD), "dead");
    ck_assert_str_eq(wait_kind_name((enum wait_kind)99), "unknown");
    ck_assert_int_eq(wait_kind_parse("collective"), WAIT_COLLECTIVE);
    ck_assert_int_eq(wait_kind_parse("bogus"), -1);
    ck_assert_str_eq(waits_syscall_name(SYS_read), "read");
    ck_assert(waits_syscall_io(SYS_recvfrom));
    ck_assert(waits_syscall_io(SYS_epoll_pwait));
    ck_assert(!waits_syscall_io(SYS_futex));
    ck_assert(!waits_syscall_io(-1));
    ck_assert_ptr_null(waits_syscall_name(-1));
    ck_assert_ptr_null(waits_syscall_name(100000));
}
END_TEST

/* A history stack (outermost first) is classified innermost first. */
START_TEST(test_classify_stack)
{
    struct history h;
    const struct hframe fr[] = {{"get", "/p/multiprocessing/queues.py", 1, false},
                                {"leaf", "/x/t.py", 2, false},
                                {"main", "/x/t.py", 3, false}};
    struct waits *w = parse_ok("data module multiprocessing.queues\nhost func leaf\n");
    struct wait_facts f;
    char why[200];
    uint32_t s;

    history_init(&h, 0, 0, "host");
    s = history_intern_stack(&h, fr, 3);
    wait_facts_init(&f);
    ck_assert_int_eq(waits_classify_stack(w, &h, s, &f, why, sizeof(why)), WAIT_DATA);
    ck_assert_int_eq(waits_classify_stack(w, &h, HSTACK_NONE, &f, why, sizeof(why)), WAIT_UNKNOWN);
    history_fini(&h);
    waits_free(w);
}
END_TEST

/* The /proc parsers on what kernels write, odd command names and garbage included. */
START_TEST(test_procwait_parsers)
{
    const char stat[] = "812 (a) b) c) S 1 812 812 0 -1 4194560";
    char st = 0, wchan[16], line[128];
    bool nofds = true;
    int nr = 7;

    ck_assert_int_eq(procwait_parse_stat(stat, sizeof(stat) - 1, &st), 0);
    ck_assert_int_eq(st, 'S');
    ck_assert_int_lt(procwait_parse_stat("812 (a", 6, &st), 0);
    ck_assert_int_lt(procwait_parse_stat("812 (a)", 7, &st), 0);
    ck_assert_int_lt(procwait_parse_stat("812 (a) 7", 9, &st), 0);
    ck_assert_int_eq(procwait_parse_syscall("running\n", 8, &nr, &nofds), 0);
    ck_assert_int_eq(nr, -1);
    snprintf(line, sizeof(line), "%d 0x3 0x7ffd 0x1 0 0 0 0x7ffd 0x7f12\n", SYS_read);
    ck_assert_int_eq(procwait_parse_syscall(line, strlen(line), &nr, &nofds), 0);
    ck_assert_int_eq(nr, SYS_read);
    ck_assert(!nofds);
    /* time.sleep before 3.11: pselect6(0, NULL, NULL, NULL, &ts, NULL) is a sleep. */
    snprintf(line, sizeof(line), "%d 0x0 0x0 0x0 0x0 0x7ffd1 0x0 0x7ffd 0x7f12\n", SYS_pselect6);
    ck_assert_int_eq(procwait_parse_syscall(line, strlen(line), &nr, &nofds), 0);
    ck_assert(nofds);
    snprintf(line, sizeof(line), "%d 0x5 0x7ff 0x0 0x0 0x7ffd1 0x0 0x7ffd 0x7f12\n", SYS_pselect6);
    ck_assert_int_eq(procwait_parse_syscall(line, strlen(line), &nr, &nofds), 0);
    ck_assert(!nofds);
    ck_assert_int_eq(procwait_parse_syscall("-1 0x7ffd 0x7f12\n", 17, &nr, NULL), 0);
    ck_assert_int_eq(nr, -1);
    ck_assert_int_lt(procwait_parse_syscall("x 1", 3, &nr, NULL), 0);
    ck_assert_int_lt(procwait_parse_syscall("", 0, &nr, NULL), 0);
    ck_assert_int_lt(procwait_parse_syscall("99999999999", 11, &nr, NULL), 0);
    procwait_parse_wchan("pipe_read", 9, wchan, sizeof(wchan));
    ck_assert_str_eq(wchan, "pipe_read");
    procwait_parse_wchan("0", 1, wchan, sizeof(wchan));
    ck_assert_str_eq(wchan, "");
    procwait_parse_wchan("a b", 3, wchan, sizeof(wchan));
    ck_assert_str_eq(wchan, "");
    procwait_parse_wchan("a_very_long_kernel_function", 27, wchan, sizeof(wchan));
    ck_assert_str_eq(wchan, "");
}
END_TEST

/* Whether this test runs under qemu-user (the aarch64 suite on an x86-64 host, started by
 * meson through its exe wrapper): the kernel then names the host's system calls in
 * /proc/PID/syscall, not this build's. qemu answers /proc/self/exe itself, so the wrapper
 * meson names is what tells. */
static bool under_qemu(void)
{
    const char *w = getenv("MESON_EXE_WRAPPER");

    return w && strstr(w, "qemu");
}

/* A real child blocked reading a pipe nobody writes: state S in read; then stopped: T. */
START_TEST(test_procwait_read_child)
{
    int fds[2];
    pid_t pid;
    struct procwait pw = {0};
    struct app_err err = {0};
    char c;
    bool qemu = under_qemu();

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[1]);
        _exit(read(fds[0], &c, 1) == 1 ? 0 : 1);
    }
    /* The child gets there when it gets there: poll until it sleeps (a busy machine). */
    for (int i = 0; i < 600; i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};

        ck_assert_int_eq(procwait_read(pid, pid, &pw, &err), 0);
        if (pw.state == 'S' && (pw.syscall == SYS_read || (qemu && pw.syscall >= 0)))
            break;
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(pw.state, 'S');
    if (!qemu)
        ck_assert_int_eq(pw.syscall, SYS_read);
    kill(pid, SIGSTOP);
    for (int i = 0; i < 600 && pw.state != 'T'; i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};

        nanosleep(&ts, NULL);
        ck_assert_int_eq(procwait_read(pid, pid, &pw, &err), 0);
    }
    ck_assert_int_eq(pw.state, 'T');
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert_int_eq(procwait_read(pid, pid, &pw, &err), APP_E_GONE);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

static Suite *waits_suite(void)
{
    Suite *s = suite_create("waits");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_bad_lines);
    tcase_add_test(tc, test_comments_and_blank_lines);
    tcase_add_test(tc, test_frames_innermost_first);
    tcase_add_test(tc, test_module_file_func_match);
    tcase_add_test(tc, test_native_frames);
    tcase_add_test(tc, test_precedence);
    tcase_add_test(tc, test_builtin);
    tcase_add_test(tc, test_names_and_syscalls);
    tcase_add_test(tc, test_classify_stack);
    tcase_add_test(tc, test_procwait_parsers);
    tcase_add_test(tc, test_procwait_read_child);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(waits_suite());
}
