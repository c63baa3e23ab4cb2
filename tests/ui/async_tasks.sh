#!/bin/sh
# The monitor's `a`: asyncio tasks in the Rank view. tests/py/async_tasks.py runs nested tasks,
# a gather, a Queue and a task with a non-ASCII name; before `a` the Rank view shows threads
# only; after it, each task as `Task "NAME"` under the main thread (the one shown), with its
# await chain innermost first (inner: Event.wait above level2 above level1); `a` again hides
# them. Then tests/py/async_stuck.py (no subinterpreter: a thread state of one shares the main
# thread's ident, which keeps the main thread's stack from ever reading unchanged): the hang
# verdict names the loop's select before `a`, and once the tasks are read the innermost
# coroutine of the deepest await chain of the main thread's loop (Queue.get), not the
# shallower task awaiting it nor the deeper one on another thread's loop; the merged tree
# shows the chains under the loop.
. "$(dirname "$0")/lib.sh"

python3 "$RANKTOP_SRCDIR/tests/py/async_tasks.py" "$WORK/ready" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready" || fail "the target did not start"

ui_start at 160 90 -- "$RANKTOP_BIN" -p "$T"
wait_screen "^ +- +$T " 30 || { show_screen "table"; fail "the target is not listed"; }
keys 2
wait_screen 'Thread MainThread' 30 || { show_screen "rank"; fail "Rank view: no main thread"; }
screen_lacks 'Task "' || fail "tasks shown before a"
keys a
wait_screen 'asyncio tasks on: read 10 times a second' 10 || { show_screen "after a"; fail "no tasks note"; }
wait_screen '^ *- +Task "inner"' 30 || { show_screen "after a"; fail "no task inner"; }
wait_screen '^ *- +Task "задача-函数-😀"' 30 || { show_screen "after a"; fail "no non-ASCII task"; }
wait_screen '^ *- +Task "queue-waiter"' 30 || { show_screen "after a"; fail "no task queue-waiter"; }
# inner's chain right under its line, innermost first: Event.wait, level2, level1.
screen | awk '/Task "inner"/ { t = NR } t && NR == t + 1 && /Event\.wait \(/ { a = NR }
    t && NR == t + 2 && /level2 \(.*async_tasks\.py:[0-9]+\)/ { b = NR }
    t && NR == t + 3 && /level1 \(.*async_tasks\.py:[0-9]+\)/ { c = NR }
    END { exit !(a && b && c) }' || { show_screen "order"; fail "inner's await chain is not level1 > level2 > Event.wait"; }
# Tasks come after the thread they are shown under.
screen | awk '/Thread MainThread/ { m = NR } /Task "inner"/ { t = NR } END { exit !(m && t && m < t) }' ||
    { show_screen "order"; fail "tasks are not under the main thread"; }
keys a
wait_screen 'asyncio tasks hidden' 10 || fail "a did not hide the tasks"
wait_screen_gone 'Task "' 10 || fail "tasks still shown after a again"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
kill "$T"

python3 "$RANKTOP_SRCDIR/tests/py/async_stuck.py" "$WORK/ready2" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready2" || fail "async_stuck.py did not start"
ui_start as 160 50 -- "$RANKTOP_BIN" -p "$T" --hang-after 2
wait_screen 'HANG [0-9]+s: 1 rank in [A-Za-z.]*select \(selectors\.py:[0-9]+\)' 30 ||
    fail "no verdict in the loop's select"
keys a
wait_screen 'HANG [0-9]+s: 1 rank in Queue\.get \(queues\.py:[0-9]+\)' 30 ||
    fail "the verdict does not name the deepest await (Queue.get)"
# The merged tree (view 1) goes down the loop into each task's chain: serve > fetch > Queue.get.
wait_screen 'fetch \(.*async_stuck\.py:[0-9]+\)' 20 || fail "the merged tree lacks the tasks' chains"
screen | awk '/serve \(.*async_stuck\.py/ { s = NR } /fetch \(.*async_stuck\.py/ { f = NR }
    /Queue\.get \(.*queues\.py/ && !/HANG/ { q = NR } END { exit !(s && f && q && s < f && f < q) }' ||
    { show_screen "merged"; fail "the merged tree does not show serve > fetch > Queue.get"; }
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
