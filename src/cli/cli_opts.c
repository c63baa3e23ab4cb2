/* Option tables to getopt_long arrays and --help lines (cli_opts.h). Nothing here knows a
 * command: the tables are the commands'. The help is wrapped to CLI_OPTS_WIDTH with every
 * description from CLI_OPTS_COLUMN, whichever table an option comes from, so the shared
 * discovery and multi-node flags line up with a command's own. Main thread only. */
#include "cli_opts.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const struct cli_opt cli_opts_help[] = {
    {'h', "help", NULL, "this help"},
    {0},
};

static bool is_short(int val)
{
    return val > 0 && val < 0x80 && isalnum(val);
}

/* Whether an earlier named entry of the tables (before table t, entry i) has this name. */
static bool named_before(const struct cli_opt *const *tabs, size_t t, size_t i)
{
    const char *name = tabs[t][i].name;

    for (size_t k = 0; k <= t; k++)
        for (size_t j = 0; tabs[k][j].name || tabs[k][j].help; j++) {
            if (k == t && j == i)
                return false;
            if (tabs[k][j].name && !strcmp(tabs[k][j].name, name))
                return true;
        }
    return false;
}

void cli_opts_getopt(const struct cli_opt *const *tabs, struct cli_getopt *g)
{
    size_t n = 0, s = 0;

    memset(g, 0, sizeof(*g));
    for (size_t t = 0; tabs[t]; t++)
        for (size_t i = 0; tabs[t][i].name || tabs[t][i].help; i++) {
            const struct cli_opt *o = &tabs[t][i];

            if (!o->name || named_before(tabs, t, i))
                continue;
            if (n == CLI_OPTS_MAX)
                abort(); /* a table grew past the arrays: raise CLI_OPTS_MAX */
            g->longs[n++] =
                (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->val};
            if (is_short(o->val)) {
                g->shorts[s++] = (char)o->val;
                if (o->arg)
                    g->shorts[s++] = ':';
            }
        }
}

/* The length of the next word of text, with the words after it that begin with '-' (an
 * option, "-o BatchMode=yes"): a line of the help never starts with a dash, so that it never
 * reads as an option of its own (tests/e2e/install.sh reads the flags from those lines). */
static size_t glued_word(const char *text)
{
    size_t n = strcspn(text, " \n");

    while (text[n] == ' ' && text[n + 1] == '-')
        n += 1 + strcspn(text + n + 1, " \n");
    return n;
}

/* Prints text from column `at` (the cursor is there), wrapped at CLI_OPTS_WIDTH on blanks;
 * '\n' starts a new line at the column. */
static void wrap(FILE *f, const char *text, int at)
{
    int col = at;

    while (*text) {
        size_t word = glued_word(text);

        if (col > at && col + 1 + (int)word > CLI_OPTS_WIDTH) {
            fprintf(f, "\n%*s", at, "");
            col = at;
        } else if (col > at) {
            fputc(' ', f);
            col++;
        }
        fwrite(text, 1, word, f);
        col += (int)word;
        text += word;
        if (*text == '\n') {
            fprintf(f, "\n%*s", at, "");
            col = at;
        }
        while (*text == ' ' || *text == '\n')
            text++;
    }
    fputc('\n', f);
}

void cli_opts_row(FILE *f, const char *left, const char *help)
{
    int n = (int)strlen(left);

    fputs(left, f);
    if (n + 2 > CLI_OPTS_COLUMN) {
        fputc('\n', f);
        n = 0;
    }
    fprintf(f, "%*s", CLI_OPTS_COLUMN - n, "");
    wrap(f, help, CLI_OPTS_COLUMN);
}

void cli_opts_usage(FILE *f, const struct cli_opt *const *tabs)
{
    for (size_t t = 0; tabs[t]; t++)
        for (size_t i = 0; tabs[t][i].name || tabs[t][i].help; i++) {
            const struct cli_opt *o = &tabs[t][i];
            char left[96];

            if (!o->name) { /* a paragraph: its blank lines first, then wrapped */
                const char *text = o->help;

                for (; *text == '\n'; text++)
                    fputc('\n', f);
                wrap(f, text, 0);
                continue;
            }
            if (named_before(tabs, t, i))
                continue;
            if (is_short(o->val))
                snprintf(left, sizeof(left), "  -%c, --%s%s%s", o->val, o->name, o->arg ? " " : "",
                         o->arg ? o->arg : "");
            else
                snprintf(left, sizeof(left), "      --%s%s%s", o->name, o->arg ? " " : "",
                         o->arg ? o->arg : "");
            cli_opts_row(f, left, o->help);
        }
}
