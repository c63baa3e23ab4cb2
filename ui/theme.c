/* Colour roles -> curses attributes, with a monochrome table used when NO_COLOR is set or the
 * terminal has no colours. UI thread only (curses is not thread-safe). */
#include "theme.h"

#include <curses.h>
#include <stdlib.h>

struct role_style {
    short fg, bg;
    int attr;      /* with colours */
    int mono_attr; /* without */
};

static const struct role_style styles[ROLE_COUNT] = {
    [ROLE_NORMAL] = {-1, -1, 0, 0},
    [ROLE_TITLE] = {COLOR_CYAN, -1, A_BOLD, A_BOLD},
    [ROLE_HEADER] = {COLOR_BLACK, COLOR_GREEN, 0, A_REVERSE},
    [ROLE_SELECTED] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
    [ROLE_BAR_OK] = {COLOR_GREEN, -1, 0, 0},
    [ROLE_BAR_WARN] = {COLOR_YELLOW, -1, 0, A_BOLD},
    [ROLE_BAR_CRIT] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [ROLE_BANNER] = {COLOR_WHITE, COLOR_RED, A_BOLD, A_REVERSE | A_BOLD},
    [ROLE_ODD] = {COLOR_RED, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [ROLE_DIM] = {COLOR_BLUE, -1, A_BOLD, A_DIM},
    [ROLE_KEY] = {COLOR_WHITE, -1, A_BOLD, A_BOLD},
    [ROLE_KEYTEXT] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
    [ROLE_STATUS] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [ROLE_TAGGED] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    /* htop's sort column: black on cyan in the green header; without colours, bold and not
     * reversed in the reversed header. */
    [ROLE_SORTED] = {COLOR_BLACK, COLOR_CYAN, A_BOLD, A_BOLD | A_UNDERLINE},
};

/* Whether the terminal is shown without colours; set once by theme_init. It describes the
 * terminal, whose colour pairs curses also keeps process-wide, so it stays beside them rather
 * than in struct ui. */
static bool mono;

void theme_init(void)
{
    const char *nc = getenv("NO_COLOR");

    mono = (nc && *nc) || !has_colors();
    if (mono)
        return;
    start_color();
    use_default_colors();
    for (int r = 1; r < ROLE_COUNT; r++)
        init_pair((short)r, styles[r].fg, styles[r].bg);
}

int theme_attr(enum theme_role role)
{
    if (mono)
        return styles[role].mono_attr;
    return (int)COLOR_PAIR(role) | styles[role].attr;
}

bool theme_is_mono(void)
{
    return mono;
}
