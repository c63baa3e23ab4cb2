/* Kubernetes pods as hosts: the kubectl argv for one pod, and the parsers of kubectl's pod
 * JSON (a list, or one pod) that give the head its pods, their nodes and the job a pod is in.
 *
 * Invariants: every pod name handed out passed kube_name_ok (it becomes an argv word and a
 * host name); the list is sorted by name with no name twice; the parsers never read past len
 * and keep nothing of the input. Pure (no I/O, no global state): any thread. */
#include "ranktop/remote/kube.h"

#include "ranktop/base/util.h"

#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kube_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > KUBE_NAME_MAX || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' ||
        s[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return true;
}

char **kube_exec_argv(const struct rsh_tmpl *t, const char *pod, const char *ns,
                      const char *container, const char *const *cmd)
{
    const char *extra[6];
    size_t n = 0;

    /* kubectl takes its flags after the pod too; "--" ends them, so that the agent's own
     * flags (--this-node, --rate) are never read as kubectl's. */
    if (ns && ns[0]) {
        extra[n++] = "-n";
        extra[n++] = ns;
    }
    if (container && container[0]) {
        extra[n++] = "-c";
        extra[n++] = container;
    }
    extra[n++] = "--";
    extra[n] = NULL;
    /* A template that ends in "--" (written for a kubectl without these words) has its "--"
     * placed by us, after the pod and -n/-c. */
    if (t->n > 1 && !strcmp(t->w[t->n - 1], "--")) {
        struct rsh_tmpl cut = *t;

        cut.n--;
        return rsh_argv(&cut, pod, extra, cmd, false);
    }
    return rsh_argv(t, pod, extra, cmd, false);
}

char **kube_get_argv(const struct rsh_tmpl *t, const char *const *what, const char *ns)
{
    size_t at = t ? t->n : 0, nw = 0, n = 0;
    char **v;

    for (size_t i = 0; t && i < t->n; i++)
        if (!strcmp(t->w[i], "exec")) {
            at = i;
            break;
        }
    if (!t || at == t->n || at == 0)
        at = 0; /* no "exec" word: plain kubectl */
    while (what && what[nw])
        nw++;
    v = x_calloc(at + nw + 8, sizeof(char *));
    for (size_t i = 0; i < at; i++)
        v[n++] = x_strdup(t->w[i]);
    if (!at)
        v[n++] = x_strdup("kubectl");
    v[n++] = x_strdup("get");
    v[n++] = x_strdup("pods");
    for (size_t i = 0; i < nw; i++)
        v[n++] = x_strdup(what[i]);
    if (ns && ns[0]) {
        v[n++] = x_strdup("-n");
        v[n++] = x_strdup(ns);
    }
    v[n++] = x_strdup("-o");
    v[n++] = x_strdup("json");
    return v;
}

/* The string at a path of object keys under o, or NULL. */
static const char *str_at(json_object *o, const char *k1, const char *k2)
{
    json_object *v;

    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k1, &v))
        return NULL;
    if (k2 && (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, k2, &v)))
        return NULL;
    /* A string with a NUL inside would name something else than the cluster's object. */
    if (!json_object_is_type(v, json_type_string) ||
        strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
        return NULL;
    return json_object_get_string(v);
}

static int pod_cmp(const void *a, const void *b)
{
    return strcmp(((const struct kube_pod *)a)->name, ((const struct kube_pod *)b)->name);
}

/* Adds one pod item to out, or counts it skipped. */
static void add_pod(json_object *item, bool running_only, struct kube_pods *out, size_t *cap)
{
    const char *name = str_at(item, "metadata", "name"), *node = str_at(item, "spec", "nodeName");
    const char *phase = str_at(item, "status", "phase");
    struct kube_pod *p;

    if (!kube_name_ok(name) || (running_only && (!phase || strcmp(phase, "Running")))) {
        out->skipped++;
        return;
    }
    if (out->n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        out->v = x_reallocarray(out->v, *cap, sizeof(*out->v));
    }
    p = &out->v[out->n++];
    snprintf(p->name, sizeof(p->name), "%s", name);
    /* A node name is only shown: one unfit for that is left out, the pod kept. */
    snprintf(p->node, sizeof(p->node), "%s", kube_name_ok(node) ? node : "");
}

/* Whether only white space follows what the tokener took. */
static bool rest_blank(const char *buf, size_t len, struct json_tokener *tok)
{
    for (size_t i = json_tokener_get_parse_end(tok); i < len; i++)
        if (buf[i] != ' ' && buf[i] != '\n' && buf[i] != '\t' && buf[i] != '\r')
            return false;
    return true;
}

/* The JSON object in buf[0, len), or NULL: json-c reads exactly len bytes. */
static json_object *parse_obj(const char *buf, size_t len, struct app_err *err)
{
    struct json_tokener *tok = json_tokener_new();
    json_object *o;

    if (len > (size_t)1 << 30)
        len = 0;
    o = tok ? json_tokener_parse_ex(tok, buf, (int)len) : NULL;
    if (o && (json_tokener_get_error(tok) != json_tokener_success ||
              !json_object_is_type(o, json_type_object) || !rest_blank(buf, len, tok))) {
        json_object_put(o);
        o = NULL;
    }
    if (tok)
        json_tokener_free(tok);
    if (!o)
        app_err_set(err, APP_E_PARSE, "kubectl did not print a JSON object");
    return o;
}

int kube_parse_pods(const char *buf, size_t len, bool running_only, struct kube_pods *out,
                    struct app_err *err)
{
    json_object *o, *items;
    const char *kind;
    size_t cap = 0, w = 0;

    memset(out, 0, sizeof(*out));
    if (!(o = parse_obj(buf, len, err)))
        return APP_E_PARSE;
    kind = str_at(o, "kind", NULL);
    if (kind && !strcmp(kind, "Pod")) {
        add_pod(o, running_only, out, &cap);
    } else if (json_object_object_get_ex(o, "items", &items) &&
               json_object_is_type(items, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(items); i++)
            add_pod(json_object_array_get_idx(items, i), running_only, out, &cap);
    } else {
        json_object_put(o);
        return app_err_set(err, APP_E_PARSE, "kubectl's JSON is neither a pod nor a list");
    }
    json_object_put(o);
    if (out->n)
        qsort(out->v, out->n, sizeof(*out->v), pod_cmp);
    for (size_t i = 0; i < out->n; i++) /* a name twice (two lists merged) is one pod */
        if (!w || strcmp(out->v[w - 1].name, out->v[i].name))
            out->v[w++] = out->v[i];
    out->n = w;
    return 0;
}

void kube_pods_fini(struct kube_pods *p)
{
    free(p->v);
    memset(p, 0, sizeof(*p));
}

const char *kube_pods_node(const struct kube_pods *p, const char *pod)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (!strcmp(p->v[i].name, pod))
            return p->v[i].node[0] ? p->v[i].node : NULL;
    return NULL;
}

/* A label value as Kubernetes allows it: at most 63 bytes of [A-Za-z0-9._-], alphanumeric at
 * both ends (it goes into a selector, where ',' '=' or '!' would change its meaning). */
static bool label_value_ok(const char *s)
{
    size_t n = strlen(s);

    if (!n || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

        if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
            return false;
    }
    return true;
}

int kube_parse_job(const char *buf, size_t len, char *sel, size_t sellen, struct app_err *err)
{
    static const char *const keys[] = {"job-name", "training.kubeflow.org/job-name",
                                       "jobset.sigs.k8s.io/jobset-name"};
    json_object *o, *meta, *labels;
    int rc = APP_E_NOTFOUND;

    sel[0] = '\0';
    if (!(o = parse_obj(buf, len, err)))
        return APP_E_PARSE;
    if (json_object_object_get_ex(o, "metadata", &meta) &&
        json_object_object_get_ex(meta, "labels", &labels) &&
        json_object_is_type(labels, json_type_object)) {
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && rc < 0; i++) {
            const char *v = str_at(labels, keys[i], NULL);

            if (!v)
                continue;
            if (!label_value_ok(v)) {
                rc = app_err_set(err, APP_E_PARSE, "this pod's %s label is not a label value",
                                 keys[i]);
                break;
            }
            snprintf(sel, sellen, "%s=%s", keys[i], v);
            rc = 0;
        }
    }
    if (rc == APP_E_NOTFOUND)
        app_err_set(err, rc,
                    "this pod has no job-name, training.kubeflow.org/job-name or "
                    "jobset.sigs.k8s.io/jobset-name label");
    json_object_put(o);
    return rc;
}
