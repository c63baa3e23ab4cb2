/* Argument and message helpers shared by the subcommands: PID lists, JSON strings, the
 * speaker of an error line, lines said once, and the pointer to --help. Main thread only. */
#include "cli.h"

#include "ranktop/base/util.h"

#include <json-c/json.h>
#include <stdlib.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_pids(const char *arg, int **v, int *n, char *err, unsigned errlen)
{
    const char *s = arg;

    if (!*s) {
        snprintf(err, errlen, "empty PID list");
        return -1;
    }
    while (*s) {
        char *end;
        long pid;

        /* py-spy takes hex pids too ("0x1a2b"); a leading 0 is still decimal, never octal. */
        errno = 0;
        if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isxdigit((unsigned char)s[2]))
            pid = strtol(s + 2, &end, 16);
        else
            pid = strtol(s, &end, 10);
        if (end == s || errno || pid <= 0 || pid > INT_MAX || (*end && *end != ',')) {
            snprintf(err, errlen, "invalid PID list '%s': expected PID[,PID...]", arg);
            return -1;
        }
        *v = x_reallocarray(*v, (size_t)*n + 1, sizeof(int));
        (*v)[(*n)++] = (int)pid;
        s = *end ? end + 1 : end;
        if (*end && !*s) {
            snprintf(err, errlen, "invalid PID list '%s': trailing comma", arg);
            return -1;
        }
    }
    return 0;
}

struct json_object *cli_json_str(const char *s)
{
    json_object *o;
    char *fixed;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p >= 0x80) {
            size_t k = utf8_valid_len(p);

            if (!k)
                goto fix;
            p += k - 1;
        }
    return json_object_new_string(s);
fix:
    fixed = utf8_fix(s);
    o = json_object_new_string(fixed);
    free(fixed);
    return o;
}

void cli_json_puts(json_object *o)
{
    const char *s =
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

    /* Outside strings JSON is ASCII, so a C2 80..C2 9F pair is always a C1 inside a string. */
    for (const char *c = s;; c++) {
        if (!*c || ((unsigned char)c[0] == 0xC2 && (unsigned char)c[1] >= 0x80 &&
                    (unsigned char)c[1] <= 0x9F)) {
            fwrite(s, 1, (size_t)(c - s), stdout);
            if (!*c)
                break;
            printf("\\u%04x", (unsigned char)c[1]);
            c++;
            s = c + 1;
        }
    }
    putchar('\n');
}

const char *cli_who(const char *cmd)
{
    static char who[64];

    snprintf(who, sizeof(who), "ranktop%s%s", cmd && cmd[0] ? " " : "", cmd ? cmd : "");
    return who;
}

int cli_try_help(const char *cmd)
{
    fprintf(stderr, "try '%s --help'\n", cli_who(cmd));
    return CLI_EXIT_USAGE;
}

bool cli_tell_once(struct cli_told *t, const char *cmd, const char *line)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strncmp(t->line[i], line, sizeof(t->line[i]) - 1))
            return false;
    if (t->n < CLI_TOLD_MAX) { /* only its start is kept: the compare above uses no more */
        size_t len = strnlen(line, sizeof(t->line[0]) - 1);

        memcpy(t->line[t->n], line, len);
        t->line[t->n++][len] = '\0';
    }
    fprintf(stderr, "%s: %s\n", cli_who(cmd), line);
    return true;
}
