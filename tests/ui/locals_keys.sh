#!/bin/sh
# The locals pane. Three ranks block in train_step(step, shape), rank 1 with step 41 and the
# others with 42. In the Rank view, Enter on the train_step frame shows that rank's arguments,
# read then; in the Merged view, Enter on the train_step node (the search puts the cursor on
# it) lists them for every rank side by side and marks rank 1, whose step differs. Esc closes.
. "$(dirname "$0")/lib.sh"

P=""
for r in 0 1 2; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
        python3 "$RANKTOP_SRCDIR/tests/py/locals_ranks.py" "$WORK/ready$r" &
    PIDS="$PIDS $!"
    P="$P${P:+,}$!"
    wait_for test -s "$WORK/ready$r" || fail "rank $r did not start"
done

ui_start lk 160 45 -- "$RANKTOP_BIN" -p "$P" --hang-after 600
wait_screen 'train_step \(.*locals_ranks\.py:[0-9]+\).*\[0-2\]' 30 ||
    { show_screen "merged"; fail "the merged tree has no train_step node of ranks 0-2"; }

# Merged view: the search puts the cursor on the node, Enter reads its locals on every rank.
keys /
type_text train_step
keys Enter Enter
wait_screen 'locals of train_step .* in 3 ranks' 20 || { show_screen "merged locals"; fail "no merged locals pane"; }
wait_screen '^ +\* rank 1 differs: step = 41 \(2 ranks hold 42\)' 10 ||
    { show_screen "merged locals"; fail "rank 1's step is not marked"; }
screen | grep -Eq '^ +step +42 +\*41 +42' || { show_screen "side by side"; fail "no side-by-side row for step"; }
screen | grep -Eq '^ +shape +\(8, 16\) +\(8, 16\) +\(8, 16\)' || { show_screen "shape"; fail "shape row"; }
screen_lacks 'differs: shape' || fail "shape is marked though every rank holds (8, 16)"
keys Escape
wait_screen_gone 'locals of train_step' 10 || fail "Esc did not close the pane"

# Rank view of the selected rank: Enter on the frame line shows its locals.
keys Escape 2
wait_screen 'train_step \(.*locals_ranks\.py:[0-9]+\)' 20 || { show_screen "rank"; fail "Rank view: no frame"; }
keys /
type_text train_step
keys Enter Enter
wait_screen 'locals of train_step \(.*locals_ranks\.py\), rank [0-2], read now' 20 ||
    { show_screen "rank locals"; fail "no Rank view locals pane"; }
wait_screen '^ +arg +step = 4[12] +\(int\)' 10 || { show_screen "rank locals"; fail "no step argument"; }
screen | grep -Eq '^ +arg +shape = \(8, 16\) +\(tuple\)' || { show_screen "rank locals"; fail "no shape"; }
keys Enter
wait_screen_gone 'locals of train_step' 10 || fail "Enter did not close the pane"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
