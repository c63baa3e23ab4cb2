#!/bin/sh
# htop's keys in the monitor: the key bar shows the F-keys; F3 searches the lower pane as it
# is typed (the cursor goes to a match, F3 again to the next one, Esc cancels); F4 filters the
# rank table as it is typed and the header shows the filter (Esc clears it); F5 switches the
# Merged and Rank views between tree and flat; Z pauses; F1 opens the help; F10 quits.
. "$(dirname "$0")/lib.sh"

spot() { # spot RANK FUNCTION: a rank waiting in FUNCTION
    RANK=$1 LOCAL_RANK=$1 WORLD_SIZE=2 python3 -S -c "import time
def $2():
    while True: time.sleep(0.05)
$2()" &
    PIDS="$PIDS $!"
    LAST=$!
}
# Rank 0 waits in spot_alpha until the cue file exists, then in spot_gamma under it.
CUE="$WORK/cue"
RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 -S -c "import os, time
def spot_gamma():
    while True: time.sleep(0.05)
def spot_alpha():
    while not os.path.exists('$CUE'): time.sleep(0.05)
    spot_gamma()
spot_alpha()" &
PIDS="$PIDS $!"
A=$!
spot 1 spot_beta
B=$LAST
ui_start hk 160 40 -- "$RANKTOP_BIN" -p "$A,$B" --hang-after 600
wait_screen "^ +1 +$B .* (run|idle) .*spot_beta" 30 || fail "rank 1 not listed"
wait_screen "spot_alpha \(.*\) +\[0\] x1" 30 || fail "the merged tree lacks rank 0's frame"
wait_screen "spot_beta \(.*\) +\[1\] x1" 30 || fail "the merged tree lacks rank 1's frame"
until_deadline 10 last_line_has '^F1Help F3Search F4Filter F5Tree F6Sort .*F10Quit *$' || {
    show_screen "key bar"
    fail "the key bar does not show htop's F-keys"
}

# F3: incremental search; the cursor follows what is typed; F3 again: the next match.
keys F3
wait_screen '^search: _' 10 || fail "F3 did not open the search prompt"
type_text spot_b
wait_screen '^search: spot_b_ .*F3: next' 10 || fail "the search prompt did not echo the text"
wait_selected "spot_beta .*\\[1\\] x1" || fail "typing the search did not move the cursor to spot_beta"
type_text zz
wait_screen '^search: spot_bzz_ +\(no match\)' 10 || fail "a search matching nothing is not told"
keys BSpace BSpace BSpace
wait_screen '^search: spot__ ' 10 || fail "Backspace did not edit the search"
keys Enter
wait_screen "^search 'spot_' +filter ''" 10 || fail "Enter did not keep the search"
wait_selected "spot_.*\\] x1" || fail "no spot_ line is under the cursor"
if selected "spot_alpha .*\\] x1"; then first=spot_alpha second=spot_beta; else first=spot_beta second=spot_alpha; fi
keys F3
wait_selected "$second .*\\] x1" || fail "F3 did not move to the next match ($second)"
keys F3
wait_selected "$first .*\\] x1" || fail "F3 did not wrap around to the first match ($first)"
# Three matches (the tree's three lines): Shift-F3 goes back the way F3 came.
keys /
type_text 'string>:'
keys Enter
wait_screen "^search 'string>:'" 10 || fail "Enter did not keep the second search"
L0='<module> .*\] x2' L1='spot_alpha .*\[0\] x1' L2='spot_beta .*\[1\] x1'
at() { # at: the index of the tree line under the cursor
    for i in 0 1 2; do
        eval "selected \"\$L$i\"" && echo $i && return 0
    done
    return 1
}
now=$(at) || { show_screen "search"; fail "no tree line under the cursor"; }
keys F3
eval "wait_selected \"\$L$(((now + 1) % 3))\"" || fail "F3 did not go to the next of three matches"
keys S-F3
eval "wait_selected \"\$L$now\"" || fail "Shift-F3 did not come back to the previous match"
keys S-F3
eval "wait_selected \"\$L$(((now + 2) % 3))\"" || fail "Shift-F3 did not wrap backwards"
# Esc in the prompt cancels the search.
keys /
wait_screen '^search: _' 10 || fail "/ did not open the search prompt"
type_text spot
keys Escape
wait_screen_gone '^search' 10 || fail "Esc in the search prompt did not cancel the search"

# F4: the filter applies as it is typed and shows in the header; F4 again edits it; Esc
# clears it.
keys F4
wait_screen '^filter ranks: _' 10 || fail "F4 did not open the filter prompt"
type_text 'rank 1'
until_deadline 10 rank_row_count_is 1 || fail "the filter did not apply as typed: $(rank_rows)"
rank_rows | grep -Eq "^ +1 +$B " || fail "the row left by the filter is not rank 1: $(rank_rows)"
keys Enter
wait_screen "^ranktop .*\[filter 'rank 1'\]" 10 || fail "the header does not show the filter"
keys F4
wait_screen '^filter ranks: rank 1_' 10 || fail "F4 did not offer the filter set for editing"
keys Escape
until_deadline 10 rank_row_count_is 2 || fail "Esc did not clear the filter: $(rank_rows)"
wait_screen_gone '\[filter ' 10 || fail "the header still shows a filter"

# F5: the merged tree becomes the flat top functions of every rank, and back.
keys F5
wait_screen 'OWN% +TOTAL% +FUNCTION .*all ranks, flat \(F5: tree\)' 10 ||
    fail "F5 did not show the flat view in the Merged view"
wait_screen '^ +[0-9.]+ +[0-9.]+ +spot_alpha ' 10 || fail "the flat view lacks spot_alpha"
wait_screen_gone '\[0\] x1' 10 || fail "the tree stayed after F5"
keys F5
wait_screen "spot_alpha \(.*\) +\[0\] x1" 10 || fail "F5 again did not bring the tree back"
# ... and in the Rank view: the selected rank's functions, flat.
keys 2
wait_screen '^rank 0 +pid ' 10 || fail "view 2 (Rank) has no rank title"
keys F5
wait_screen 'FUNCTION .*selected rank, flat \(F5: tree\)' 10 || fail "F5 did not flatten the Rank view"
wait_screen '^ +[0-9.]+ +[0-9.]+ +spot_alpha ' 10 || fail "the Rank view's flat form lacks spot_alpha"
keys F5
wait_screen 'Thread .*\(tid [0-9]+\)' 10 || fail "F5 again did not bring the Rank view's threads back"
keys 1

# Z pauses the display, like p; again resumes.
keys Z
wait_screen '^ranktop .*\[PAUSED\]' 10 || fail "Z did not show [PAUSED]"
keys Z
wait_screen_gone '\[PAUSED\]' 10 || fail "Z again did not resume"

# F1: the help lists the F-keys; F1 closes it.
keys F1
wait_screen '^F3 or / +search as you type' 10 || fail "F1 did not open the help with F3"
wait_screen '^F5 +tree / flat' 10 || fail "the help lacks F5"
keys F1
wait_screen '^ +RANK +PID ' 10 || fail "F1 again did not close the help"

# A search that matches nothing waits for a match: the stacks are live, and the line it looks
# for may only come later (a collective the ranks pass through between steps). It says
# "(no match)" until then, and then the cursor goes to the match.
keys /
type_text spot_gamma
wait_screen '^search: spot_gamma_ +\(no match\)' 10 || fail "a search matching nothing yet is not told"
keys Enter
wait_screen "^search 'spot_gamma' \(no match\) +filter ''" 10 ||
    fail "the status line does not say the kept search matches nothing yet"
touch "$CUE"
wait_screen "spot_gamma \(.*\) +\[0\] x1" 30 || fail "rank 0 did not move on to spot_gamma"
wait_screen "^search 'spot_gamma' +filter ''" 10 ||
    fail "the search still says (no match) while spot_gamma is shown"
wait_selected "spot_gamma .*\\[0\\] x1" || fail "the search did not go to the match that appeared"

# F10 quits.
keys F10
wait_screen '^EXITED 0$' 20 || fail "F10 did not quit with status 0"
echo ok
