#!/bin/sh
# `ranktop demo` in tmux: the four demo ranks are listed, the stalling rank 2 shows up in the
# merged view, every view, drill-down, search, filter, pause, baseline and help answer, and `q`
# restores the terminal and stops the demo ranks.
. "$(dirname "$0")/lib.sh"

ui_start demo 160 45 -- "$RANKTOP_BIN" demo --hang-after 5
wait_screen '^ +RANK +PID ' 30 || fail "the monitor did not draw its rank table"
APP=$(app_pid)
[ -n "$APP" ] || fail "ranktop is not running"

# The demo ranks are ranktop's children; each carries RANK in its environment. They may
# still be going through an interpreter wrapper (pyenv shims exec several times): wait until
# each one is python with its environment readable.
demo_ranks() {
    RANKPIDS=$(pgrep -P "$APP" -f demo_job.py | sort -n | tr '\n' ' ')
    [ "$(echo $RANKPIDS | wc -w)" -eq 4 ] || return 1
    for p in $RANKPIDS; do
        readlink "/proc/$p/exe" | grep -q python || return 1
        [ -n "$(proc_env "$p" RANK)" ] || return 1
    done
}
wait_for demo_ranks || fail "expected 4 demo ranks (python, RANK set), found: $RANKPIDS"
SYNCDIR=""
for p in $RANKPIDS; do
    r=$(proc_env "$p" RANK)
    SYNCDIR=$(proc_env "$p" DEMO_SYNC_DIR)
    eval "PID_OF_$r=$p"
    wait_screen "^ +$r +$p +.* (run|idle|stuck) " 30 || fail "rank $r (pid $p) not listed"
done
[ -n "$SYNCDIR" ] || fail "demo ranks have no DEMO_SYNC_DIR"

# Rank 2 stalls in load_batch_slowly every ~40 steps for 8 s: the merged tree shows it alone.
wait_screen 'load_batch_slowly \(.*demo_job\.py:[0-9]+\) +\[2\] x1' 90 ||
    fail "the merged view never showed rank 2 alone in load_batch_slowly"

# Views 2-6 (keys) and back to 1 (Tab wraps around).
keys 2
wait_screen '^rank [0-3] +pid [0-9]+ ' 10 || fail "view 2 (Rank) has no rank title"
wait_screen 'Thread .*\(tid [0-9]+\)' 10 || fail "view 2 (Rank) lists no thread"
keys 3
wait_screen 'OWN% +TOTAL% +FUNCTION ' 10 || fail "view 3 (Top) has no header"
keys 4
wait_screen '^RANK +PID +BUSY% +SWITCH/s ' 10 || fail "view 4 (GIL) has no header"
keys 5
wait_screen '^RANK +PID +RSS .* RSS history' 10 || fail "view 5 (Memory) has no header"
keys Tab
wait_screen '^this node only \(--hosts' 10 || fail "Tab from view 5 did not go to view 6 (Hosts)"
keys Tab
wait_screen '^<module> .*\[0-3\] x4' 10 || fail "Tab from view 6 did not return to the merged view"
wait_screen_gone 'this node only' 10 || fail "the Hosts view stayed after Tab"

# Enter drills into the selected rank (j moves to the second row: rank 1), Esc comes back.
keys j
keys Enter
wait_screen "^rank 1 +pid $PID_OF_1 " 10 || fail "Enter on rank 1 did not open its Rank view"
wait_screen 'Thread .*\(tid [0-9]+\)' 10 || fail "the drilled-into rank lists no thread"
keys Escape
wait_screen '^<module> .*\[0-3\] x4' 10 || fail "Esc did not return to the merged view"
wait_screen_gone 'Thread .*\(tid [0-9]+\)' 10 || fail "the Rank view stayed after Esc"

# Search: the prompt echoes what is typed, Enter keeps it in the status line.
keys /
wait_screen '^search: _' 10 || fail "/ did not open the search prompt"
type_text all_reduce
wait_screen '^search: all_reduce_' 10 || fail "the search prompt did not echo the text"
keys Enter
wait_screen "^search 'all_reduce' +filter ''" 10 || fail "the status line does not show the search"

# Filter ranks: `rank 1` leaves one row, rank 1's.
keys '\'
wait_screen '^filter ranks: _' 10 || fail "\\ did not open the filter prompt"
type_text 'rank 1'
wait_screen '^filter ranks: rank 1_' 10 || fail "the filter prompt did not echo the text"
keys Enter
until_deadline 10 rank_row_count_is 1 || {
    show_screen "filter"
    fail "filter 'rank 1' left $(rank_rows | wc -l) rows"
}
rank_rows | grep -Eq "^ +1 +$PID_OF_1 " || fail "the row left by the filter is not rank 1: $(rank_rows)"
wait_screen "^search 'all_reduce' +filter 'rank 1'" 10 || fail "the status line does not show the filter"

# Esc clears search and filter: all four ranks again.
keys Escape
until_deadline 10 rank_row_count_is 4 || fail "Esc did not clear the filter: $(rank_rows)"
wait_screen_gone "^search '" 10 || fail "Esc did not clear the search"

# p pauses the display (and again resumes it); m sets the memory baseline.
keys p
wait_screen '^ranktop .*\[PAUSED\]' 10 || fail "p did not show [PAUSED]"
wait_screen 'display paused' 10 || fail "p did not say the display is paused"
keys p
wait_screen 'display resumed' 10 || fail "p again did not resume"
wait_screen_gone '\[PAUSED\]' 10 || fail "[PAUSED] stayed after p again"
keys m
wait_screen 'memory baseline set' 10 || fail "m did not set the memory baseline"

# ? opens the help, ? closes it.
keys '?'
wait_screen '^ranktop: a top for distributed PyTorch jobs' 10 || fail "? did not open the help"
wait_screen '^Esc / Backspace +back' 10 || fail "the help lacks the key list"
wait_screen_gone '^ +RANK +PID ' 10 || fail "the help did not replace the panes"
keys '?'
wait_screen '^ +RANK +PID ' 10 || fail "? again did not close the help"
wait_screen_gone '^ranktop: a top for' 10 || fail "the help stayed open"

# q: the program exits 0, the terminal is restored, the demo ranks and their directory are gone.
keys q
wait_screen '^EXITED 0$' 20 || fail "q did not exit ranktop with status 0"
screen_lacks 'F10Quit' || fail "the monitor's screen is still shown after exit"
[ "$(pane_fmt '#{alternate_on}')" = 0 ] || fail "the alternate screen is still on after exit"
[ "$(pane_fmt '#{cursor_flag}')" = 1 ] || fail "the cursor is still hidden after exit"
for p in $RANKPIDS; do
    if kill -0 "$p" 2> /dev/null; then
        fail "demo rank $p is still running after q: $(ps -o pid,stat,cmd -p "$p" | tail -n 1)"
    fi
done
[ ! -e "$SYNCDIR" ] || fail "the demo's sync directory $SYNCDIR was left behind"
echo ok
