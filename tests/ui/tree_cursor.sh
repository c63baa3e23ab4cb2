#!/bin/sh
# The Merged view's tree cursor. Three ranks wait in train_step -> sync, rank 1 with step 41
# and the others with 42 (each writes its step to a truth file). In the Merged view, w gives
# the arrows to the tree: they move a highlighted cursor over its nodes while the rank table's
# selection stays. The cursor stays on its node when the rows move: ranks 0 and 2 go on to
# barrier(), which sorts above sync (2 ranks against 1), and the cursor is still on sync. Up
# moves it to train_step, Enter lists train_step's locals on every rank and names the odd one
# as its truth file says; no search is used. With t, Enter on a thread's node folds it. w
# again gives the arrows back to the rank table: Down and Enter drill into rank 1.
. "$(dirname "$0")/lib.sh"

P=""
for r in 0 1 2; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 \
        python3 "$RANKTOP_SRCDIR/tests/py/tree_ranks.py" "$WORK/ready$r" "$WORK/cue" "$WORK/truth$r" &
    PIDS="$PIDS $!"
    P="$P${P:+,}$!"
    eval "PID_OF_$r=$!"
    wait_for test -s "$WORK/ready$r" || fail "rank $r did not start"
done
# The odd rank and its step, the step the others hold: from the ranks' own truth files.
ODD=$(cat "$WORK"/truth* | awk '{ n[$2]++; r[$2] = $1 } END { for (s in n) if (n[s] == 1) print r[s], s }')
COMMON=$(cat "$WORK"/truth* | awk '{ n[$2]++ } END { for (s in n) if (n[s] > 1) print s }')
ODD_RANK=${ODD% *} ODD_STEP=${ODD#* }
[ -n "$ODD_RANK" ] && [ -n "$COMMON" ] || fail "truth files: no odd rank ($(cat "$WORK"/truth*))"

ui_start tc 160 45 -- "$RANKTOP_BIN" -p "$P" --hang-after 600
SYNC='sync \(.*tree_ranks\.py:[0-9]+\)'
wait_screen "$SYNC +\\[0-2\\] x3" 30 || fail "the merged tree has no sync node of ranks 0-2"
wait_selected "^ +0 +$PID_OF_0 " || fail "rank 0 is not the selected row at start"
wait_screen ' 6 Hosts +arrows: ranks \(w: tree\)' 10 || fail "the tab row does not say what the arrows move"
keys '?'
wait_screen '^w +Merged view: arrows to the tree' 10 || fail "the help does not list w"
keys '?'
wait_screen_gone '^w +Merged view' 10 || fail "? did not close the help"

# w, then arrows only: Home, Down, Down go <module>, train_step, sync.
keys w
wait_screen ' 6 Hosts +arrows: tree \(w: ranks\)' 10 || fail "w did not give the arrows to the tree"
keys Home Down Down
wait_selected "$SYNC +\\[0-2\\] x3" || fail "Home Down Down did not put the cursor on sync"
selected "^ +0 +$PID_OF_0 " || { show_screen "rank table"; fail "the rank table's selection moved"; }

# Ranks 0 and 2 move on: barrier [0,2] x2 now sorts above sync [1] x1. The cursor follows sync.
touch "$WORK/cue"
wait_screen 'barrier \(.*tree_ranks\.py:[0-9]+\) +\[0,2\] x2' 30 || fail "ranks 0 and 2 did not reach barrier"
wait_screen "$SYNC +\\[1\\] x1" 10 || fail "sync is not rank 1's alone"
wait_selected "$SYNC +\\[1\\] x1" || fail "the cursor did not stay on sync when its row moved"
selected 'barrier \(.*\[0,2\] x2' && { show_screen "cursor"; fail "the cursor is on barrier (the row sync had)"; }

# k and Up: barrier, then train_step; Enter: its locals on every rank, the odd one named.
keys k
wait_selected 'barrier \(.*\[0,2\] x2' || fail "k did not move the cursor up to barrier"
keys Up
wait_selected 'train_step \(.*\[0-2\] x3' || fail "Up did not move the cursor to train_step"
keys Enter
wait_screen 'locals of train_step .* in 3 ranks' 20 || { show_screen "merged locals"; fail "no merged locals pane"; }
wait_screen "^ +\\* rank $ODD_RANK differs: step = $ODD_STEP \\(2 ranks hold $COMMON\\)" 10 ||
    { show_screen "merged locals"; fail "rank $ODD_RANK's step $ODD_STEP is not marked"; }
keys Escape
wait_screen_gone 'locals of train_step' 10 || fail "Esc did not close the pane"
wait_selected 'train_step \(.*\[0-2\] x3' || fail "the cursor left train_step after the locals pane"

# t: every thread, each under a node of its name. Enter on such a node, no frame, folds it.
keys t
wait_screen '^Thread MainThread .*\[0-2\] x3' 10 || fail "t shows no thread node"
keys Home
wait_selected '^Thread MainThread .*\[0-2\] x3' || fail "Home did not go to the thread node"
keys Enter
wait_screen '^\+ Thread MainThread .*\[0-2\] x3' 10 || fail "Enter did not fold the thread node"
wait_screen_gone 'train_step \(.*\[0-2\] x3' 10 || fail "the folded node still shows its frames"
wait_selected '^\+ Thread MainThread' || fail "the cursor left the folded node"
keys Enter
wait_screen 'train_step \(.*\[0-2\] x3' 10 || fail "Enter again did not unfold the thread node"
keys t
wait_screen_gone '^Thread MainThread' 10 || fail "t again did not go back to main threads"

# w again: the arrows move the rank table; Down and Enter drill into rank 1.
keys w
wait_screen ' 6 Hosts +arrows: ranks \(w: tree\)' 10 || fail "w again did not give the arrows back"
keys Down
wait_selected "^ +1 +$PID_OF_1 " || fail "Down did not select rank 1 in the rank table"
keys Enter
wait_screen "^rank 1 +pid $PID_OF_1 " 10 || fail "Enter did not drill into rank 1"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
