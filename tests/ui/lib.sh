# Shared helpers for the UI tests: they run the real monitor in a private tmux server, send
# keys and read the screen back with capture-pane (the way tmux's own regress/ tests work).
# Sourced by each test; RANKTOP_BIN and RANKTOP_SRCDIR come from meson. Builds on the e2e
# helpers (kill_tree, fail, wait_for, json_check, start_rank, $WORK, $PIDS).
. "$(dirname "$0")/../e2e/lib.sh"

command -v tmux > /dev/null 2>&1 || {
    echo "tmux is not installed: skipped" >&2
    exit 77
}
unset TMUX TMUX_PANE

UI_SOCK=t$$          # one tmux server per test run
UI_SESSIONS=""       # sessions started by ui_start
S=""                 # the current session: screen, keys, wait_screen act on it

# tm ARGS...: tmux on this test's own server, no user config, a UTF-8 client locale.
tm() {
    LC_ALL=C.UTF-8 tmux -L "$UI_SOCK" -f /dev/null "$@"
}

# ui_cleanup: asks each program still running to quit (SIGTERM: the demo then stops its ranks
# and removes its directory), kills what is left after 8 s, then the tmux server.
ui_cleanup() {
    apps=""
    for s in $UI_SESSIONS; do
        S=$s
        a=$(app_pid) && [ -n "$a" ] && apps="$apps $a" && kill -TERM "$a" 2> /dev/null
    done
    [ -z "$apps" ] || until_deadline 8 no_process_left $apps || true
    for s in $UI_SESSIONS; do
        p=$(cat "$WORK/$s.panepid" 2> /dev/null) && kill_tree "$p"
    done
    tm kill-server > /dev/null 2>&1 || true
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$UI_SOCK"
    cleanup
}

# no_process_left PID...: none of the processes exists any more.
no_process_left() {
    for p in "$@"; do
        kill -0 "$p" 2> /dev/null && return 1
    done
    return 0
}
trap ui_cleanup EXIT
trap 'exit 1' INT TERM HUP

# now_ms: monotonic enough wall clock in milliseconds.
now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# sh_quote ARG: ARG quoted for sh.
sh_quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# ui_start NAME WIDTH HEIGHT [VAR=VALUE...] -- COMMAND [ARG...]
# Runs COMMAND in a new detached session NAME of WIDTH x HEIGHT, as
#   sh -c 'COMMAND...; echo EXITED $?; sleep 300'
# so the pane shows what follows the program (the exit status, the restored terminal). The
# environment is the test's with the locale variables cleared, LANG=C.UTF-8 and NO_COLOR unset,
# then VAR=VALUE applied (e.g. LANG=C, NO_COLOR=1, PATH=...). NAME becomes the current session.
# UI_SHELL_IGNORES_INT=1 among them makes the pane's shell ignore SIGINT, so that a Ctrl-C sent
# to the program (in the shell's process group) does not end the shell too; the program sets
# its own SIGINT handler.
ui_start() {
    name=$1 w=$2 h=$3
    shift 3
    run="$WORK/run-$name.sh"
    {
        echo 'unset LC_ALL LC_CTYPE LC_MESSAGES LC_COLLATE LANGUAGE NO_COLOR'
        echo 'export LANG=C.UTF-8'
        while [ $# -gt 0 ] && [ "$1" != "--" ]; do
            [ "$1" = UI_SHELL_IGNORES_INT=1 ] && echo "trap '' INT"
            echo "export $(sh_quote "$1")"
            shift
        done
        [ $# -gt 0 ] && shift
        for a in "$@"; do printf '%s ' "$(sh_quote "$a")"; done
        echo
        echo 'echo "EXITED $?"'
        echo 'exec sleep 300'
    } > "$run"
    tm new-session -d -s "$name" -x "$w" -y "$h" "sh $run" || fail "tmux new-session failed"
    tm display-message -p -t "$name" '#{pane_pid}' > "$WORK/$name.panepid" ||
        fail "no pane for session $name"
    UI_SESSIONS="$UI_SESSIONS $name"
    S=$name
}

# ui_use NAME: makes NAME the current session.
ui_use() {
    S=$1
}

# app_pid: pid of the program started by ui_start in the current session (empty when it has
# not started or has exited).
app_pid() {
    pgrep -P "$(cat "$WORK/$S.panepid" 2> /dev/null)" -x "$(basename "$RANKTOP_BIN")" 2> /dev/null | head -n 1
}

# screen: the visible screen of the current session, one line per row.
screen() {
    tm capture-pane -p -t "$S"
}

# screen_attrs: the screen with colours and attributes as escape sequences.
screen_attrs() {
    tm capture-pane -p -e -t "$S"
}

# pane_fmt FORMAT: a tmux format for the current pane (#{pane_height}, #{alternate_on}...).
pane_fmt() {
    tm display-message -p -t "$S" "$1"
}

# keys KEY...: tmux key names (Enter, Escape, Up, F10...) or single characters.
keys() {
    tm send-keys -t "$S" "$@"
}

# type_text TEXT: TEXT typed literally.
type_text() {
    tm send-keys -t "$S" -l "$1"
}

# resize W H: resizes the current session's window (the program gets SIGWINCH).
resize() {
    tm resize-window -t "$S" -x "$1" -y "$2"
}

# until_deadline SECONDS CMD...: retries CMD every 0.1 s until it succeeds or SECONDS (may
# be fractional) have passed on the clock; then returns 1.
until_deadline() {
    end=$(($(now_ms) + $(awk -v t="$1" 'BEGIN { printf "%d", t * 1000 }')))
    shift
    while ! "$@"; do
        [ "$(now_ms)" -ge "$end" ] && return 1
        sleep 0.1
    done
}

# screen_has ERE: the current screen has a line matching ERE (kept in $WORK/screen.txt).
screen_has() {
    screen > "$WORK/screen.txt" 2> /dev/null || return 1
    grep -Eq -- "$1" "$WORK/screen.txt"
}

# screen_lacks ERE: no line of the current screen matches ERE.
screen_lacks() {
    screen > "$WORK/screen.txt" 2> /dev/null || return 1
    ! grep -Eq -- "$1" "$WORK/screen.txt"
}

show_screen() {
    echo "--- screen of session $S (${1:-}):" >&2
    screen >&2 2> /dev/null || echo "(no screen)" >&2
    echo "---" >&2
}

# wait_screen ERE [SECONDS]: waits (default 20 s) until a screen line matches ERE; on
# timeout prints the screen to stderr and returns 1.
wait_screen() {
    until_deadline "${2:-20}" screen_has "$1" && return 0
    show_screen "no line matches /$1/ after ${2:-20} s"
    return 1
}

# wait_screen_gone ERE [SECONDS]: waits until no screen line matches ERE.
wait_screen_gone() {
    until_deadline "${2:-20}" screen_lacks "$1" && return 0
    show_screen "a line still matches /$1/ after ${2:-20} s"
    return 1
}

# rank_rows: the rows of the rank table on the current screen (between the column header
# and the view tabs).
rank_rows() {
    screen | awk '/^ *RANK +PID /{ f = 1; next } / 1 Merged +2 Rank/{ f = 0 }
        f && /^ +\*?[0-9?]+ +[0-9]+ /'
}

# rank_row_count_is N: the rank table shows exactly N rows.
rank_row_count_is() {
    [ "$(rank_rows | wc -l)" -eq "$1" ]
}

# last_line_has ERE: the last row of the pane matches ERE (and the capture has every row).
last_line_has() {
    screen > "$WORK/screen.txt" 2> /dev/null || return 1
    [ "$(wc -l < "$WORK/screen.txt")" -eq "$(pane_fmt '#{pane_height}')" ] &&
        tail -n 1 "$WORK/screen.txt" | grep -Eq -- "$1"
}

# uses_colour: the screen has an SGR colour (foreground or background other than default).
uses_colour() {
    screen_attrs | python3 -c 'import re, sys
codes = re.findall(r"\x1b\[([0-9;]*)m", sys.stdin.read())
ps = [int(p) for c in codes for p in c.split(";") if p]
sys.exit(0 if any(30 <= p <= 38 or 40 <= p <= 48 or 90 <= p <= 107 for p in ps) else 1)'
}

# proc_env PID VAR: VAR from the environment of PID.
proc_env() {
    tr '\0' '\n' < "/proc/$1/environ" 2> /dev/null | sed -n "s/^$2=//p" | head -n 1
}

# selected ERE: a screen line matching ERE (a Python regex) is drawn as the cursor or the
# selected row (cyan background, or reverse video without colours).
selected() {
    screen_attrs | python3 -c 'import re, sys
for line in sys.stdin.read().splitlines():
    if re.search(sys.argv[1], re.sub(r"\x1b\[[0-9;]*m", "", line)):
        m = re.match(r"(?:\x1b\[[0-9;]*m)*", line)
        codes = [p for c in re.findall(r"\x1b\[([0-9;]*)m", m.group(0)) for p in c.split(";")]
        if "46" in codes or "7" in codes:
            sys.exit(0)
sys.exit(1)' "$1"
}
# wait_selected ERE: waits (10 s) until selected ERE.
wait_selected() {
    until_deadline 10 selected "$1" && return 0
    show_screen "$1 not selected"
    return 1
}

# key_effect SECONDS KEY ERE: presses KEY and requires its effect (ERE on screen) within
# SECONDS; used to show keys are answered promptly.
key_effect() {
    t0=$(now_ms)
    keys "$2"
    wait_screen "$3" "$1" || return 1
    echo "key '$2' answered in $(($(now_ms) - t0)) ms (deadline $1 s)" >&2
}
