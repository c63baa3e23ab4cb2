#!/bin/sh
# The demo through window resizes (80x24, 200x60, too small, back) and in the display modes:
# colours by default, monochrome with NO_COLOR, ASCII tree lines with LANG=C.
. "$(dirname "$0")/lib.sh"

# layout_ok W H: the pane is W x H, the rank table header is shown, the key bar with its
# Quit key is the last line.
layout_ok() {
    [ "$(pane_fmt '#{pane_width}x#{pane_height}')" = "$1x$2" ] &&
        screen_has '^ +RANK +PID ' && last_line_has 'F10Quit'
}

expect_layout() {
    until_deadline 10 layout_ok "$1" "$2" || {
        show_screen "layout at $1x$2"
        fail "at $1x$2 the rank table header or the key bar (F10Quit) on the last line is missing"
    }
}

quit_ok() {
    keys q
    wait_screen '^EXITED 0$' 20 || fail "q did not exit ranktop with status 0 ($1)"
}

# 1. UTF-8 with colours, resized.
ui_start utf 120 40 -- "$RANKTOP_BIN" demo --hang-after 5
wait_screen '^<module> .*\[0-3\] x4' 30 || fail "no merged tree"
wait_screen '^ +3 +[0-9]+ ' 30 || fail "rank 3 not listed"
expect_layout 120 40
wait_screen '^ *(└─|├─)' 10 || fail "no UTF-8 tree lines in a UTF-8 locale"
uses_colour || fail "no colours by default (TERM=$(pane_fmt '#{client_termname}'))"

resize 80 24
expect_layout 80 24
until_deadline 10 eval '[ "$(rank_rows | wc -l)" -ge 3 ]' || fail "at 80x24 fewer than 3 ranks shown"

resize 200 60
expect_layout 200 60
until_deadline 10 rank_row_count_is 4 || fail "at 200x60 not all 4 ranks shown"

resize 50 14
wait_screen 'terminal too small' 10 || fail "no 'terminal too small' at 50x14"
wait_screen_gone '^ +RANK +PID ' 10 || fail "the rank table is drawn at 50x14"

resize 120 40
wait_screen_gone 'terminal too small' 10 || fail "'terminal too small' stayed after growing back"
expect_layout 120 40
wait_screen '^<module> .*\[0-3\] x4' 10 || fail "no merged tree after growing back"
keys 2
wait_screen 'Thread .*\(tid [0-9]+\)' 10 || fail "keys not answered after the resizes"
quit_ok "UTF-8 run"

# 2. NO_COLOR: the same screen, without any colour.
ui_start mono 120 40 NO_COLOR=1 -- "$RANKTOP_BIN" demo --hang-after 5
wait_screen '^<module> .*\[0-3\] x4' 30 || fail "no merged tree with NO_COLOR"
until_deadline 10 rank_row_count_is 4 || fail "not all 4 ranks listed with NO_COLOR"
expect_layout 120 40
if uses_colour; then
    screen_attrs | cat -v | head -n 12 >&2
    fail "colours used although NO_COLOR is set"
fi
quit_ok "NO_COLOR run"

# 3. LANG=C: ASCII only, tree lines drawn with \- and |-.
ui_start ascii 120 40 LANG=C -- "$RANKTOP_BIN" demo --hang-after 5
wait_screen '^<module> .*\[0-3\] x4' 30 || fail "no merged tree with LANG=C"
wait_screen '^ *(\\-|\|-)main ' 10 || fail "no ASCII tree lines with LANG=C"
until_deadline 10 rank_row_count_is 4 || fail "not all 4 ranks listed with LANG=C"
expect_layout 120 40
screen_lacks '└─|├─|│' || fail "UTF-8 tree lines with LANG=C"
screen > "$WORK/ascii.txt"
if LC_ALL=C grep -n '[^ -~]' "$WORK/ascii.txt" > "$WORK/nonascii.txt"; then
    fail "non-ASCII characters on the screen with LANG=C: $(head -n 3 "$WORK/nonascii.txt")"
fi
quit_ok "LANG=C run"
echo ok
