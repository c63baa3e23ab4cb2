/* Semantic colour roles of the monitor. Drawing code names roles, never colours. */
#ifndef RANKTOP_THEME_H
#define RANKTOP_THEME_H

#include <stdbool.h>

enum theme_role {
    ROLE_NORMAL,
    ROLE_TITLE,    /* header text */
    ROLE_HEADER,   /* table headers */
    ROLE_SELECTED, /* the selected row */
    ROLE_BAR_OK,
    ROLE_BAR_WARN,
    ROLE_BAR_CRIT,
    ROLE_BANNER,  /* the HANG banner */
    ROLE_ODD,     /* odd rank out */
    ROLE_DIM,     /* stale, exited, secondary */
    ROLE_KEY,     /* key bar: key */
    ROLE_KEYTEXT, /* key bar: label */
    ROLE_STATUS,  /* status line messages */
    ROLE_TAGGED,
    ROLE_SORTED, /* the title of the column the rank table is sorted by */
    ROLE_COUNT
};

/* Sets up colour pairs (or monochrome attributes when NO_COLOR is set or the terminal has no
 * colours). Call after initscr. */
void theme_init(void);

/* The curses attribute for a role (colour pair and/or A_BOLD...). */
int theme_attr(enum theme_role role);

bool theme_is_mono(void);

#endif
