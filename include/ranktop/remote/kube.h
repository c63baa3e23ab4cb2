/* Kubernetes pods as hosts (--launcher kubectl): the argv that runs a command in one pod, and
 * pure parsers of what `kubectl get pods -o json` and `kubectl get pod NAME -o json` print.
 *
 * kubectl exec passes the command's argv to the container runtime as it is (no shell parses
 * it), and needs "--" before the command, else a command word starting with "-" is taken as
 * one of kubectl's flags. Pod names are checked here (DNS-1123 characters, at most
 * KUBE_NAME_MAX bytes) because they become argv words and host names. Pure (no I/O, no global
 * state): any thread may use it. */
#ifndef RANKTOP_KUBE_H
#define RANKTOP_KUBE_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_REMOTE)
#error "ranktop/remote/kube.h belongs to collectors/remote/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "ranktop/remote/rsh.h"
#include "ranktop/base/status.h"

/* The launcher's default template: the pod goes after it (or at a %h), then the words below. */
#define KUBE_DEFAULT_EXEC "kubectl exec -i"

/* The longest pod or node name kept, in bytes: the head's host names hold 63. */
#define KUBE_NAME_MAX 63

/* A label selector or namespace given on the command line: at most this long. */
#define KUBE_ARG_MAX 512

struct kube_pod {
    char name[KUBE_NAME_MAX + 1];
    char node[KUBE_NAME_MAX + 1]; /* spec.nodeName; "" when not scheduled or not said */
};

struct kube_pods {
    struct kube_pod *v; /* sorted by name, each name once */
    size_t n;
    size_t skipped; /* items left out: not Running (when asked), or a name unfit for a host */
};

/* The argv that runs cmd (NULL-terminated, words as they are) in pod: the template's words
 * with the pod at %h (else after them), then [-n ns] [-c container] "--", then cmd; a "--" that
 * ends the template is left out (this one takes its place). ns and container may be NULL.
 * NULL-terminated; free with rsh_argv_free. Every kubectl exec the head runs is built here. */
char **kube_exec_argv(const struct rsh_tmpl *t, const char *pod, const char *ns,
                      const char *container, const char *const *cmd);

/* The argv of a `kubectl get` run with the template's kubectl: the template's words before
 * its "exec" word (its kubectl and global flags such as --context; "kubectl" when it has no
 * "exec"), then "get", "pods", the words of what (NULL-terminated), [-n ns], "-o", "json".
 * free with rsh_argv_free. */
char **kube_get_argv(const struct rsh_tmpl *t, const char *const *what, const char *ns);

/* Parses a pod list (kind List, items[]) or one pod (kind Pod) into out (zeroed first; free
 * with kube_pods_fini). running_only keeps the pods whose status.phase is "Running". Items
 * without a usable name are skipped and counted. Returns 0, or APP_E_PARSE with err when buf
 * is not such JSON. */
int kube_parse_pods(const char *buf, size_t len, bool running_only, struct kube_pods *out,
                    struct app_err *err);
void kube_pods_fini(struct kube_pods *p);

/* The node of pod in p, or NULL. */
const char *kube_pods_node(const struct kube_pods *p, const char *pod);

/* The selector of the job one pod (buf: `kubectl get pod NAME -o json`) belongs to:
 * "LABEL=VALUE" for the first label it carries of job-name, training.kubeflow.org/job-name and
 * jobset.sigs.k8s.io/jobset-name. Returns 0, APP_E_NOTFOUND when it carries none, or
 * APP_E_PARSE; err says which. */
int kube_parse_job(const char *buf, size_t len, char *sel, size_t sellen, struct app_err *err);

/* Whether s is a name kubectl could hold for a pod or namespace: 1 to KUBE_NAME_MAX bytes of
 * [a-z0-9.-], starting and ending with a letter or digit. */
bool kube_name_ok(const char *s);

#endif
