#!/bin/sh
# Native sampling of targets that change under it: threads that start and exit all the time
# (churn.py: 8 short-lived threads at once, fast recursion, fresh code objects), and processes
# that exit in the middle of sampling (exits_soon.py, at varied moments). record --native at
# 50 Hz over all threads must finish normally, write its trace, leave no thread of a live
# target stopped or traced, and never crash.
. "$(dirname "$0")/lib.sh"

untraced_all() { # untraced_all PID: no thread of PID in tracing stop or traced
    for s in /proc/"$1"/task/*/status; do
        st=$(awk '/^State:/ { print $2 }' "$s" 2> /dev/null) || continue
        tr=$(awk '/^TracerPid:/ { print $2 }' "$s" 2> /dev/null) || continue
        [ -z "$st" ] && continue
        { [ "$st" = t ] || [ "$st" = T ] || [ "${tr:-0}" != 0 ]; } && return 1
    done
    return 0
}

mkdir -p "$WORK/churn"
python3 -S "$RANKTOP_SRCDIR/tests/py/churn.py" "$WORK/churn" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/churn/ready" || fail "churn did not start"
rc=0
$RANKTOP_BIN record --native --all-threads -r 50 -d 4 -p "$T" -o "$WORK/churn.json" 2> "$WORK/churn.err" || rc=$?
[ "$rc" = 0 ] || fail "record --native on churn: exit $rc: $(cat "$WORK/churn.err")"
json_check "$WORK/churn.json" "any(e.get('cat') == 'native' for e in (d['traceEvents'] if isinstance(d, dict) else d))" ||
    fail "churn: no native frame recorded"
sleep 0.2
untraced_all "$T" || { sleep 1; untraced_all "$T"; } || fail "churn: a thread was left stopped or traced"
kill -0 "$T" || fail "churn: the target died"

k=0
while [ $k -lt 12 ]; do
    k=$((k + 1))
    rm -rf "$WORK/x" && mkdir -p "$WORK/x"
    python3 -S "$RANKTOP_SRCDIR/tests/py/exits_soon.py" $((100 + k * 37)) "$WORK/x" &
    X=$!
    PIDS="$PIDS $X"
    wait_for test -s "$WORK/x/ready" || fail "exiting target $k did not start"
    rc=0
    $RANKTOP_BIN record --native --all-threads -r 100 -d 2 -p "$X" -o "$WORK/x.json" 2> "$WORK/x.err" || rc=$?
    # 0: written; 1: nothing recorded. Never a signal.
    [ "$rc" -le 1 ] || fail "record --native on an exiting target $k: exit $rc: $(cat "$WORK/x.err")"
    wait "$X" || fail "exiting target $k did not exit normally (status $?)"
done
echo ok
