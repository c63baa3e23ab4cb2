#!/bin/sh
# The header's achieved rate is measured over a full window of sampling passes: the first
# frames show "--" (not "49.5/1 Hz", one pass over the few milliseconds since the start), and
# once a window has passed the figure is the rate asked for. At 1 Hz the window is 20 s, so
# the first frame this test sees, however late the machine lets it look, is still "--".
. "$(dirname "$0")/lib.sh"

start_rank 0 1
ui_start ff 160 40 -- "$RANKTOP_BIN" -p "$LAST" -r 1 --hang-after 600

# header_rate: the rate field of the header on the current screen ("--", "0.0", "49.5"...).
header_rate() {
    screen 2> /dev/null | sed -n 's/^ranktop .*  \([-0-9.]*\)\/1 Hz .*/\1/p' | head -n 1
}
has_header() {
    [ -n "$(header_rate)" ]
}
until_deadline 30 has_header || {
    show_screen "first frame"
    fail "the monitor drew no header with a rate"
}
first=$(header_rate)
[ "$first" = "--" ] || {
    show_screen "first frame"
    fail "the first frame shows a rate ($first/1 Hz) before a window was measured"
}
# Every frame until the figure appears shows "--" or a sane rate, never a bogus one.
sane() {
    r=$(header_rate)
    [ "$r" = "--" ] || [ -z "$r" ] && return 1
    awk -v r="$r" 'BEGIN { exit !(r >= 0.8 && r <= 1.2) }' || {
        show_screen "rate"
        fail "the header shows $r/1 Hz"
    }
}
until_deadline 90 sane || fail "the rate never appeared after a full window"
echo "first frame '--', then $(header_rate)/1 Hz"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
