#!/bin/sh
# The monitor starts whatever the host's terminfo database holds. With TERM naming an entry no
# database has (also with $TERMINFO, ~/.terminfo and TERMINFO_DIRS pointing at empty
# directories) it draws its rank table with the built-in xterm-256color entry, says so once in
# the status line, answers keys and quits cleanly, leaving no temporary file behind. With an
# entry the host has, and with one only the user has ($TERMINFO, ~/.terminfo, TERMINFO_DIRS),
# it uses that entry and says nothing.
. "$(dirname "$0")/lib.sh"

start_rank 0 1
T=$LAST
mkdir -p "$WORK/empty" "$WORK/home" "$WORK/tmp"
NOTE='no terminfo entry for TERM=.* on this host: using the built-in xterm-256color'

# fallback_case NAME TERM VAR=VALUE...: the monitor on T with TERM and the variables; expects
# the note.
fallback_case() {
    name=$1 t=$2
    shift 2
    ui_start "$name" 150 30 TERM="$t" TMPDIR="$WORK/tmp" "$@" -- "$RANKTOP_BIN" -p "$T"
    wait_screen '^ +RANK +PID ' 30 || fail "$name: the monitor did not start with TERM=$t"
    wait_screen "$NOTE" 10 || fail "$name: no note about the built-in entry"
    wait_screen "^ +0 +$T " 30 || fail "$name: the rank is not listed"
    keys q
    wait_screen '^EXITED 0$' 20 || fail "$name: q did not quit with status 0"
    [ -z "$(ls -A "$WORK/tmp")" ] || fail "$name: left $(ls -A "$WORK/tmp") in TMPDIR"
}

fallback_case unknown nonexistent-term-xyz
fallback_case unknown-emptydirs nonexistent-term-xyz TERMINFO="$WORK/empty" \
    TERMINFO_DIRS="$WORK/empty" HOME="$WORK/home"

# known_case NAME TERM VAR=VALUE...: the monitor on T with TERM and the variables (TERMINFO and
# TERMINFO_DIRS unset unless given); expects the host's or user's entry, no note.
known_case() {
    name=$1 t=$2
    shift 2
    ui_start "$name" 150 30 TERM="$t" TMPDIR="$WORK/tmp" "$@" -- \
        sh -c 'for v in TERMINFO TERMINFO_DIRS; do [ -n "$(eval echo \${$v:-})" ] || unset $v; done
exec "$0" -p "$1"' "$RANKTOP_BIN" "$T"
    wait_screen "^ +0 +$T " 30 || fail "$name: the monitor did not start with TERM=$t"
    screen_lacks 'no terminfo entry' || fail "$name: the note is shown although the entry exists"
    keys q
    wait_screen '^EXITED 0$' 20 || fail "$name: q did not quit with status 0"
}

# The host's entry through the directories the monitor adds to the search.
known_case host xterm-256color TERMINFO= TERMINFO_DIRS=
# An entry only the user has, in each place ncurses looks: $TERMINFO, ~/.terminfo,
# TERMINFO_DIRS (the user's list is kept as given).
for d in ti home/.terminfo tidirs; do
    infocmp xterm-256color | sed 's/^xterm-256color|/ranktop-test-term|/' |
        tic -x -o "$WORK/$d" - || fail "tic could not write a test entry"
done
known_case terminfo ranktop-test-term TERMINFO="$WORK/ti" TERMINFO_DIRS=
rm -rf "$WORK/ti"
known_case home ranktop-test-term HOME="$WORK/home" TERMINFO= TERMINFO_DIRS=
rm -rf "$WORK/home/.terminfo"
known_case dirs ranktop-test-term TERMINFO_DIRS="$WORK/tidirs" TERMINFO=
echo ok
