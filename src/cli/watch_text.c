/* report.txt of `ranktop watch`: rendered from the report's JSON object alone, so the text
 * and report.json always say the same. Sections: the verdict lines, the rank table, the
 * merged tree with rank sets, every rank's stacks (Python and native frames, asyncio tasks),
 * the traces. Strings from targets go through text_safe (no control bytes). Main thread. */
#include "watch_report.h"

#include "ranktop/base/util.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;

    return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* The string at key, "-" when absent or null; other types as JSON writes them. */
static const char *str(json_object *o, const char *key)
{
    json_object *v = get(o, key);

    if (!v)
        return "-";
    if (json_object_is_type(v, json_type_string))
        return text_safe(json_object_get_string(v));
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
}

static void who(FILE *f, json_object *o)
{
    if (get(o, "rank"))
        fprintf(f, "rank %s", str(o, "rank"));
    else
        fprintf(f, "pid %s", str(o, "pid"));
    fprintf(f, " (pid %s) on %s", str(o, "pid"), str(o, "host"));
}

static void verdict_text(FILE *f, json_object *root)
{
    json_object *v = get(root, "verdict"), *odd = get(v, "odd"), *ex = get(v, "exited"),
                *dead = get(root, "dead"), *st = get(root, "straggler");

    fprintf(f, "ranktop %s report, %s, host %s (ranktop %s, schema %s)\n", str(root, "kind"),
            str(root, "time"), str(root, "host"), str(root, "ranktop"), str(root, "schema"));
    if (get(v, "text"))
        fprintf(f, "%s\n", str(v, "text"));
    if (dead) {
        fputs("dead: ", f);
        who(f, dead);
        fprintf(f, ": %s at %s\n", str(dead, "exit"), str(dead, "at"));
    }
    if (st)
        fprintf(f, "straggler: rank %s, the odd one out in %.0f%% of the judged ticks\n",
                str(st, "rank"), 100 * json_object_get_double(get(st, "odd_share")));
    fprintf(f, "%s of %s live ranks in %s, unchanged since %s (%s s)\n", str(v, "majority_ranks"),
            str(v, "live_ranks"), str(v, "where"), str(v, "since"), str(v, "since_s"));
    for (size_t i = 0; odd && i < json_object_array_length(odd); i++) {
        json_object *o = json_object_array_get_idx(odd, i);

        fputs("odd: ", f);
        who(f, o);
        fprintf(f, " in %s, waiting for %s, unchanged since %s (%s s)\n", str(o, "where"),
                str(o, "wait"), str(o, "since"), str(o, "since_s"));
    }
    for (size_t i = 0; ex && i < json_object_array_length(ex); i++) {
        json_object *o = json_object_array_get_idx(ex, i);

        fputs("exited: ", f);
        who(f, o);
        fprintf(f, ": %s at %s\n", str(o, "exit"), str(o, "at"));
    }
    if (!json_object_get_boolean(get(root, "exit_status_known")))
        fputs("(exit statuses are not known here: no process-event connector)\n", f);
}

static void ranks_text(FILE *f, json_object *root)
{
    json_object *a = get(root, "ranks");

    fprintf(f, "\nRanks\n%-6s %-16s %8s %-8s %-10s %8s %6s %6s %8s %8s %7s  %s\n", "RANK", "HOST",
            "PID", "STATE", "WAIT", "SINCE", "CPU%", "GIL%", "RSS_MiB", "DEV_MiB", "DEV%", "TOP");
    for (size_t i = 0; a && i < json_object_array_length(a); i++) {
        json_object *r = json_object_array_get_idx(a, i);

        fprintf(f, "%-6s %-16s %8s %-8s %-10s %8s %6s %6s %8s %8s %7s  %s\n", str(r, "rank"),
                str(r, "host"), str(r, "pid"), str(r, "state"), str(r, "wait"), str(r, "since_s"),
                str(r, "cpu_pct"), str(r, "gil_pct"), str(r, "rss_mib"), str(r, "device_mem_mib"),
                str(r, "device_util_pct"), str(r, "top"));
    }
}

static void tree_text(FILE *f, json_object *root)
{
    json_object *a = get(root, "tree");

    fputs("\nMerged tree (ranks through each frame; * odd branch)\n", f);
    for (size_t i = 0; a && i < json_object_array_length(a); i++) {
        json_object *n = json_object_array_get_idx(a, i);
        int depth = json_object_get_int(get(n, "depth"));

        fprintf(f, "%*s%s%s (%s%s%s)  [%s]\n", 2 * depth, "",
                json_object_get_boolean(get(n, "odd")) ? "* " : "", str(n, "function"),
                str(n, "file"), get(n, "line") ? ":" : "", get(n, "line") ? str(n, "line") : "",
                str(n, "ranks"));
    }
}

static void frame_text(FILE *f, json_object *fr, const char *indent)
{
    const char *file = str(fr, "file"), *base = strrchr(file, '/');
    bool native = !strcmp(str(fr, "kind"), "native");

    if (native)
        fprintf(f, "%s%s (%s) [native]\n", indent,
                get(fr, "function") ? str(fr, "function") : str(fr, "address"),
                base ? base + 1 : file);
    else if (get(fr, "line"))
        fprintf(f, "%s%s (%s:%s)\n", indent, str(fr, "function"), file, str(fr, "line"));
    else
        fprintf(f, "%s%s (%s)\n", indent, str(fr, "function"), file);
}

static void thread_text(FILE *f, json_object *t)
{
    json_object *fr = get(t, "frames"), *tasks = get(t, "tasks"), *w = get(t, "wait");

    fprintf(f, "\nThread %s \"%s\" (%s%s)", str(t, "tid"), str(t, "name"), str(t, "state"),
            json_object_get_boolean(get(t, "gil")) ? ", holds GIL" : "");
    if (w)
        fprintf(f, " wait: %s (%s)", str(w, "kind"), str(w, "why"));
    fputc('\n', f);
    if (get(t, "error"))
        fprintf(f, "    (stack unreadable: %s)\n", str(t, "error"));
    for (size_t i = 0; fr && i < json_object_array_length(fr); i++)
        frame_text(f, json_object_array_get_idx(fr, i), "    ");
    for (size_t i = 0; tasks && i < json_object_array_length(tasks); i++) {
        json_object *k = json_object_array_get_idx(tasks, i), *kf = get(k, "frames");

        fprintf(f, "  Task \"%s\" (%s)\n", str(k, "name"), str(k, "state"));
        for (size_t j = 0; kf && j < json_object_array_length(kf); j++)
            frame_text(f, json_object_array_get_idx(kf, j), "      ");
    }
}

static void stacks_text(FILE *f, json_object *root)
{
    json_object *a = get(root, "stacks");

    fputs("\nStacks (innermost frame first)\n", f);
    if (get(root, "dump_error"))
        fprintf(f, "(%s)\n", str(root, "dump_error"));
    for (size_t i = 0; a && i < json_object_array_length(a); i++) {
        json_object *p = json_object_array_get_idx(a, i), *th = get(p, "threads");

        fputs("\nProcess ", f);
        who(f, p);
        fprintf(f, "%s%s\n", get(p, "python") ? ", Python " : "",
                get(p, "python") ? str(p, "python") : "");
        if (get(p, "wait"))
            fprintf(f, "Wait: %s (%s)\n", str(get(p, "wait"), "kind"), str(get(p, "wait"), "why"));
        if (get(p, "note"))
            fprintf(f, "(%s)\n", str(p, "note"));
        if (get(p, "error"))
            fprintf(f, "(cannot read: %s)\n", str(p, "error"));
        if (get(p, "native_error"))
            fprintf(f, "(no native frames: %s)\n", str(p, "native_error"));
        for (size_t k = 0; th && k < json_object_array_length(th); k++)
            thread_text(f, json_object_array_get_idx(th, k));
    }
}

char *watch_report_text(json_object *root)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    json_object *tr = get(root, "trace");

    if (!f)
        return x_strdup("");
    verdict_text(f, root);
    ranks_text(f, root);
    tree_text(f, root);
    stacks_text(f, root);
    fprintf(f, "\nTraces of the last %s s: %s, %s\n", str(root, "window_s"), str(tr, "perfetto"),
            str(tr, "chrome"));
    fclose(f);
    return buf ? buf : x_strdup("");
}
