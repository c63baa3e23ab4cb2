/* Tests for pods as hosts (collectors/remote/kube.c): the kubectl exec argv (pod after the
 * template or at %h, -n/-c, "--" before the command, words as they are), the kubectl get argv
 * (the template's kubectl and global flags kept), pod lists and single pods parsed into
 * Running pods in name order with their nodes, hostile JSON refused or skipped without a
 * crash, and the job selector of a pod from its labels. Single-threaded. */
#include "ranktop/remote/kube.h"
#include "tsupport.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void join(char *const *v, char *out, size_t n)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; v[i]; i++) {
        int w = snprintf(out + used, n - used, "%s%s", i ? "|" : "", v[i]);

        ck_assert(w >= 0 && (size_t)w < n - used);
        used += (size_t)w;
    }
}

static const char *exec_of(const char *text, const char *ns, const char *c)
{
    static char out[1024];
    const char *cmd[] = {"ranktop", "agent", "--rate", "10", "a b;c", NULL};
    struct app_err err = {0};
    struct rsh_tmpl t;
    char **v;

    ck_assert_msg(rsh_tmpl_parse(text, &t, &err) == 0, "%s", err.msg);
    v = kube_exec_argv(&t, "w-0", ns, c, cmd);
    join(v, out, sizeof(out));
    rsh_argv_free(v);
    rsh_tmpl_fini(&t);
    return out;
}

START_TEST(test_exec_argv)
{
    ck_assert_str_eq(exec_of(KUBE_DEFAULT_EXEC, NULL, NULL),
                     "kubectl|exec|-i|w-0|--|ranktop|agent|--rate|10|a b;c");
    ck_assert_str_eq(exec_of(KUBE_DEFAULT_EXEC, "train", "pytorch"),
                     "kubectl|exec|-i|w-0|-n|train|-c|pytorch|--|ranktop|agent|--rate|10|a b;c");
    ck_assert_str_eq(exec_of("kubectl --context 'my ctx' exec %h -i", "ns", NULL),
                     "kubectl|--context|my ctx|exec|w-0|-i|-n|ns|--|ranktop|agent|--rate|10|a b;c");
    /* A template written with its own "--": one "--", after the pod and -n. */
    ck_assert_str_eq(exec_of("kubectl exec -i %h --", "ns", NULL),
                     "kubectl|exec|-i|w-0|-n|ns|--|ranktop|agent|--rate|10|a b;c");
    ck_assert_str_eq(exec_of("kubectl exec -i --", NULL, NULL),
                     "kubectl|exec|-i|w-0|--|ranktop|agent|--rate|10|a b;c");
}
END_TEST

static const char *get_of(const char *text, const char *const *what, const char *ns)
{
    static char out[1024];
    struct app_err err = {0};
    struct rsh_tmpl t;
    char **v;

    ck_assert_msg(rsh_tmpl_parse(text, &t, &err) == 0, "%s", err.msg);
    v = kube_get_argv(&t, what, ns);
    join(v, out, sizeof(out));
    rsh_argv_free(v);
    rsh_tmpl_fini(&t);
    return out;
}

START_TEST(test_get_argv)
{
    const char *sel[] = {"--selector=app=x", NULL}, *names[] = {"w-0", "w-1", NULL};

    ck_assert_str_eq(get_of(KUBE_DEFAULT_EXEC, sel, "ns"),
                     "kubectl|get|pods|--selector=app=x|-n|ns|-o|json");
    ck_assert_str_eq(get_of("/opt/k --kubeconfig /k exec -i", names, NULL),
                     "/opt/k|--kubeconfig|/k|get|pods|w-0|w-1|-o|json");
    ck_assert_str_eq(get_of("my-exec-wrapper %h", names, NULL), "kubectl|get|pods|w-0|w-1|-o|json");
}
END_TEST

#define POD(name, node, phase)                                                                     \
    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\",\"labels\":{\"app\":\"x\"}},"           \
    "\"spec\":{\"nodeName\":\"" node "\"},\"status\":{\"phase\":\"" phase "\"}}"

START_TEST(test_pods)
{
    const char *list = "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[" POD(
        "w-1", "node-b", "Running") "," POD("w-0", "node-a",
                                            "Running") "," POD("w-2", "node-a",
                                                               "Pending") "," POD("w-0", "node-a",
                                                                                  "Running") "]}";
    struct kube_pods p;
    struct app_err err = {0};

    ck_assert_int_eq(kube_parse_pods(list, strlen(list), true, &p, &err), 0);
    ck_assert_uint_eq(p.n, 2);
    ck_assert_str_eq(p.v[0].name, "w-0");
    ck_assert_str_eq(p.v[0].node, "node-a");
    ck_assert_str_eq(p.v[1].name, "w-1");
    ck_assert_str_eq(kube_pods_node(&p, "w-1"), "node-b");
    ck_assert_ptr_null(kube_pods_node(&p, "w-2"));
    ck_assert_uint_eq(p.skipped, 1);
    kube_pods_fini(&p);
    /* Not only Running: the nodes of named pods, whatever their phase. */
    ck_assert_int_eq(kube_parse_pods(list, strlen(list), false, &p, &err), 0);
    ck_assert_uint_eq(p.n, 3);
    kube_pods_fini(&p);
    /* One pod (kubectl get pods NAME -o json with one name prints the pod itself). */
    ck_assert_int_eq(kube_parse_pods(POD("solo", "n", "Running"),
                                     strlen(POD("solo", "n", "Running")), true, &p, &err),
                     0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_str_eq(p.v[0].node, "n");
    kube_pods_fini(&p);
    /* An empty list is no error here: the caller says that nothing was selected. */
    {
        const char *empty = "{\"kind\":\"List\",\"items\":[]}\n";

        ck_assert_int_eq(kube_parse_pods(empty, strlen(empty), true, &p, &err), 0);
    }
    ck_assert_uint_eq(p.n, 0);
    kube_pods_fini(&p);
}
END_TEST

/* Hostile or broken input: refused with APP_E_PARSE, or the unfit items skipped. */
static const char *const hostile[] = {
    "",
    "[]",
    "null",
    "{\"kind\":\"List\",\"items\":{}}",
    "{\"kind\":\"List\",\"items\":[",
    "{\"kind\":\"List\"}",
    "{\"items\":[]} trailing",
    "{\"kind\":\"Pod\"",
};

START_TEST(test_hostile_refused)
{
    struct kube_pods p;
    struct app_err err = {0};
    const char *s = hostile[_i];

    ck_assert_int_eq(kube_parse_pods(s, strlen(s), true, &p, &err), APP_E_PARSE);
    ck_assert_uint_eq(p.n, 0);
    ck_assert(err.msg[0]);
    kube_pods_fini(&p);
}
END_TEST

START_TEST(test_hostile_skipped)
{
    const char *list = "{\"items\":[" POD("-n", "x", "Running") "," POD("a/b", "x", "Running") "," POD(
        "", "x",
        "Running") "," POD("UPPER", "x",
                           "Running") "," POD("x\\u0000y", "x",
                                              "Running") "," POD("ok", "n;rm -rf",
                                                                 "Running") "," POD("aaaaaaaaaaaaaa"
                                                                                    "aaaaaaaaaaaaaa"
                                                                                    "aaaaaaaaaaaaaa"
                                                                                    "aaaaaaaaaaaaaa"
                                                                                    "aaaaaaaa",
                                                                                    "x",
                                                                                    "Running") ",{"
                                                                                               "\"m"
                                                                                               "eta"
                                                                                               "dat"
                                                                                               "a\""
                                                                                               ":{"
                                                                                               "\"n"
                                                                                               "ame"
                                                                                               "\":"
                                                                                               "7}}"
                                                                                               ",3,"
                                                                                               "nul"
                                                                                               "l,"
                                                                                               "\"s"
                                                                                               "tr"
                                                                                               "\","
                                                                                               "{\""
                                                                                               "met"
                                                                                               "ada"
                                                                                               "ta"
                                                                                               "\":"
                                                                                               "{\""
                                                                                               "nam"
                                                                                               "e\""
                                                                                               ":\""
                                                                                               "p\""
                                                                                               "},"
                                                                                               "\"s"
                                                                                               "tat"
                                                                                               "us"
                                                                                               "\":"
                                                                                               "{\""
                                                                                               "pha"
                                                                                               "se"
                                                                                               "\":"
                                                                                               "[1]"
                                                                                               "}}]"
                                                                                               "}";
    struct kube_pods p;
    struct app_err err = {0};

    ck_assert_int_eq(kube_parse_pods(list, strlen(list), true, &p, &err), 0);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_str_eq(p.v[0].name, "ok");
    ck_assert_str_eq(p.v[0].node, ""); /* a node name unfit to show is left out */
    ck_assert_uint_eq(p.skipped, 11);
    kube_pods_fini(&p);
}
END_TEST

/* Random bytes and every prefix of a valid list never crash the parser. */
START_TEST(test_random)
{
    const char *list = "{\"kind\":\"List\",\"items\":[" POD("w-0", "node-a", "Running") "]}";
    char buf[256];
    struct kube_pods p;
    struct app_err err = {0};
    char sel[128];

    for (size_t n = 0; n <= strlen(list); n++) {
        memcpy(buf, list, n);
        kube_parse_pods(buf, n, true, &p, &err);
        kube_pods_fini(&p);
        kube_parse_job(buf, n, sel, sizeof(sel), &err);
    }
    srand(25);
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)rand() % sizeof(buf);

        for (size_t i = 0; i < n; i++)
            buf[i] = "{}[]\",:aA0 -\\"[rand() % 13];
        kube_parse_pods(buf, n, true, &p, &err);
        kube_pods_fini(&p);
        kube_parse_job(buf, n, sel, sizeof(sel), &err);
    }
}
END_TEST

static int job_of(const char *labels, char *sel, size_t n)
{
    char buf[1024];
    struct app_err err = {0};

    snprintf(buf, sizeof(buf), "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"w-0\",\"labels\":%s}}",
             labels);
    return kube_parse_job(buf, strlen(buf), sel, n, &err);
}

START_TEST(test_job)
{
    char sel[128];

    ck_assert_int_eq(job_of("{\"job-name\":\"train\",\"x\":\"y\"}", sel, sizeof(sel)), 0);
    ck_assert_str_eq(sel, "job-name=train");
    ck_assert_int_eq(job_of("{\"jobset.sigs.k8s.io/jobset-name\":\"js\","
                            "\"training.kubeflow.org/job-name\":\"pt\"}",
                            sel, sizeof(sel)),
                     0);
    ck_assert_str_eq(sel, "training.kubeflow.org/job-name=pt");
    ck_assert_int_eq(job_of("{\"jobset.sigs.k8s.io/jobset-name\":\"js-1\"}", sel, sizeof(sel)), 0);
    ck_assert_str_eq(sel, "jobset.sigs.k8s.io/jobset-name=js-1");
    ck_assert_int_eq(job_of("{\"app\":\"x\"}", sel, sizeof(sel)), APP_E_NOTFOUND);
    ck_assert_int_eq(job_of("[]", sel, sizeof(sel)), APP_E_NOTFOUND);
    /* A value that would change the selector's meaning is refused. */
    ck_assert_int_eq(job_of("{\"job-name\":\"a,b!=c\"}", sel, sizeof(sel)), APP_E_PARSE);
    ck_assert_int_eq(job_of("{\"job-name\":7}", sel, sizeof(sel)), APP_E_NOTFOUND);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kube");
    TCase *tc = tcase_create("kube");

    tcase_add_test(tc, test_exec_argv);
    tcase_add_test(tc, test_get_argv);
    tcase_add_test(tc, test_pods);
    tcase_add_loop_test(tc, test_hostile_refused, 0, sizeof(hostile) / sizeof(hostile[0]));
    tcase_add_test(tc, test_hostile_skipped);
    tcase_add_test(tc, test_random);
    tcase_add_test(tc, test_job);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
