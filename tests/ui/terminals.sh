#!/bin/sh
# Keys under the terminals people use: for each TERM (xterm-256color, screen-256color,
# tmux-256color, linux, vt100) the monitor runs in tmux with that TERM and gets Home, End, F1,
# F3, F5 and F10 twice: first as TERM's terminfo entry spells them (`tput -T TERM khome`, sent
# byte for byte; a key the entry lacks is left out), then as tmux itself sends them, which is
# what a user inside tmux types whatever TERM says (Home is ESC [ 1 ~, F5 ESC [ 1 5 ~). Each
# key must do its own action: F5 must not be read as Esc, 1 and 5 (the Memory view), F10 must
# quit. A TERM without a terminfo entry here is skipped with a line.
. "$(dirname "$0")/lib.sh"

for r in 0 1 2; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 python3 -S -c 'import time
def nap():
    while True: time.sleep(0.05)
nap()' &
    PIDS="$PIDS $!"
    eval "P$r=$!"
done

# selected ERE: a screen line matching ERE (Python regex) is drawn as the cursor (cyan
# background, or reverse video without colours) from its first cell. capture-pane -e writes
# only attribute changes, so the attributes are followed from line to line.
selected() {
    screen_attrs | python3 -c 'import re, sys
SGR = r"\x1b\[([0-9;]*)m"
st = {"bg": None, "rev": False}
def apply(text):
    for c in re.findall(SGR, text):
        for p in [int(p or 0) for p in (c or "0").split(";")]:
            if p == 0:
                st.update(bg=None, rev=False)
            elif p in (7, 27):
                st["rev"] = p == 7
            elif 40 <= p <= 47 or p == 49:
                st["bg"] = p
for line in sys.stdin.read().splitlines():
    lead = re.match(r"(?:\x1b\[[0-9;]*m)*", line).group(0)
    apply(lead)
    if re.search(sys.argv[1], re.sub(SGR, "", line)) and (st["bg"] == 46 or st["rev"]):
        sys.exit(0)
    apply(line[len(lead):])
sys.exit(1)' "$1"
}
wait_selected() {
    until_deadline 10 selected "$1" && return 0
    show_screen "$1 not selected"
    return 1
}

# press HOW TERM CAP TMUXKEY: the key as terminfo spells it (HOW=ti; returns 1 when TERM's
# entry lacks CAP) or as tmux sends it (HOW=tmux).
press() {
    if [ "$1" = tmux ]; then
        keys "$4"
        return 0
    fi
    hex=$(tput -T "$2" "$3" 2> /dev/null | od -An -tx1) || return 1
    [ -n "$hex" ] || return 1
    # shellcheck disable=SC2086 # one argument per byte
    tm send-keys -t "$S" -H $hex
}

# round HOW TERM LAST LASTPID: Home, End, F1, F3, F5 as HOW sends them; LAST is the last
# rank of the table (pid LASTPID).
round() {
    how=$1 t=$2 last=$3 lastpid=$4 what="$2 ($1 keys)"
    if press "$how" "$t" kend End; then
        wait_selected "^ +$last +$lastpid " || fail "$what: End did not select the last rank"
        press "$how" "$t" khome Home
        wait_selected "^ +0 +$P0 " || fail "$what: Home did not select the first rank"
    else
        echo "$what: no khome/kend in terminfo, Home/End not sent" >&2
    fi
    press "$how" "$t" kf1 F1 || fail "$what: no kf1"
    wait_screen '^F3 or / +search as you type' 10 || fail "$what: F1 did not open the help"
    press "$how" "$t" kf1 F1
    wait_screen '^ +RANK +PID ' 10 || fail "$what: F1 did not close the help"
    press "$how" "$t" kf3 F3 || fail "$what: no kf3"
    wait_screen '^search: _' 10 || fail "$what: F3 did not open the search"
    keys Escape
    wait_screen_gone '^search' 10 || fail "$what: Esc did not cancel the search"
    press "$how" "$t" kf5 F5 || fail "$what: no kf5"
    wait_screen 'all ranks, flat \(F5: tree\)' 10 || fail "$what: F5 did not show the flat view"
    screen_lacks 'RSS history' || fail "$what: F5 opened the Memory view"
    press "$how" "$t" kf5 F5
    wait_screen 'nap \(<string>:3\) +\[' 10 || fail "$what: F5 again did not bring the tree back"
}

n=0
for t in xterm-256color screen-256color tmux-256color linux vt100; do
    if ! infocmp "$t" > /dev/null 2>&1; then
        echo "TERM=$t: no terminfo entry on this machine, skipped" >&2
        continue
    fi
    n=$((n + 1))
    # Two monitors one after the other: the first (ranks 0-1) quits on terminfo's F10, the
    # second (ranks 0-2) on tmux's.
    ui_start "term$n" 120 30 TERM="$t" -- sh -c \
        '"$0" -p "$1" --hang-after 600; echo "$?" > "$3"; exec "$0" -p "$2" --hang-after 600' \
        "$RANKTOP_BIN" "$P0,$P1" "$P0,$P1,$P2" "$WORK/first$n"
    wait_screen "^ranktop .* ranks 2/2 " 30 || fail "TERM=$t: the first monitor did not start"
    wait_screen "^ +1 +$P1 .*nap" 30 || fail "TERM=$t: rank 1 not listed"
    round ti "$t" 1 "$P1"
    press ti "$t" kf10 F10 || fail "TERM=$t: no kf10"
    wait_screen "^ranktop .* ranks 3/3 " 30 || fail "TERM=$t: terminfo's F10 did not quit"
    wait_screen "^ +2 +$P2 .*nap" 30 || fail "TERM=$t: rank 2 not listed"
    round tmux "$t" 2 "$P2"
    keys F10
    wait_screen '^EXITED 0' 20 || fail "TERM=$t: tmux's F10 did not quit"
    [ "$(cat "$WORK/first$n")" = 0 ] || fail "TERM=$t: the first monitor did not exit with 0"
    echo "TERM=$t: ok" >&2
done
[ "$n" -gt 0 ] || {
    echo "no terminfo entry for any of the terminals: skipped" >&2
    exit 77
}
echo ok
