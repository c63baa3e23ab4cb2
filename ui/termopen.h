/* Opening the terminal on hosts of any terminfo layout, with a built-in fallback entry. */
#ifndef RANKTOP_UI_TERMOPEN_H
#define RANKTOP_UI_TERMOPEN_H

#include <stddef.h>

/* The compiled terminfo entry embedded at build time (ui/embed_terminfo.py writes it from the
 * build machine's database; len 0 when the build machine had none). */
extern const unsigned char termopen_fallback_entry[];
extern const size_t termopen_fallback_len;
extern const char termopen_fallback_name[];

/* Starts curses on stdin/stdout for $TERM (as initscr, without its exit on failure). Sets
 * TERMINFO_DIRS to every common layout's directories when the user has not set it. When no
 * entry for $TERM is found, the built-in entry is used, and note gets one line saying so (else
 * note is ""). 0, or -1 when not even the built-in entry loads (note then says why). */
int termopen_start(char *note, size_t n);

#endif
