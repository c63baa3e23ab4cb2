#!/bin/bash
# Regenerates the /proc fixtures of tests/unit/check_memstat.c from live processes:
#   python_grow200/  smaps, smaps_rollup, status of tests/py/alloc_growth.py before ("*.before")
#                    and after ("*.after") it allocates and touches 200 MiB; addr = the address of
#                    the new buffer (it must lie in the mapping top_growth puts first)
#   sleep/           smaps, smaps_rollup, status of an idle sleep(1)
#   kthread/         status of kernel thread 2 (no Vm lines)
#   truncated/       copies of python_grow200/*.before cut short mid-line or mid-mapping
#   malformed/       copies with one value (or, in smaps, the second mapping header) damaged
# The unit test asserts concrete values read from these files, so after regenerating them
# update the expected numbers there (the script prints the figures it expects).
# Usage: tests/data/proc/capture.sh [PYTHON]   (default /usr/bin/python3, else python3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${1:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )}

snap() { # snap PID DIR SUFFIX
    cat "/proc/$1/smaps" >"$2/smaps$3"
    cat "/proc/$1/smaps_rollup" >"$2/smaps_rollup$3"
    cat "/proc/$1/status" >"$2/status$3"
}

capture_growth() {
    local d=$here/python_grow200
    mkdir -p "$d"
    coproc TARGET { "$py" -S "$here/../../py/alloc_growth.py" $((200 << 20)); }
    local line pid addr
    read -r line <&"${TARGET[0]}"
    pid=${line#ready }
    snap "$pid" "$d" .before
    echo grow >&"${TARGET[1]}"
    read -r line <&"${TARGET[0]}"
    addr=${line#grown }
    snap "$pid" "$d" .after
    echo "$addr" >"$d/addr"
    echo exit >&"${TARGET[1]}"
    wait "$TARGET_PID" || true
}

capture_sleep() {
    local d=$here/sleep
    mkdir -p "$d"
    sleep 30 &
    local pid=$!
    sleep 0.2
    snap "$pid" "$d" ""
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

derive_bad() {
    local src=$here/python_grow200 t=$here/truncated m=$here/malformed
    mkdir -p "$t" "$m"
    # Cut inside the Pss line of smaps_rollup, inside the last mapping of smaps (after its header
    # and Size line, before Rss), and inside the VmRSS line of status.
    awk '/^Pss:/ { printf "Pss:    "; exit } { print }' "$src/smaps_rollup.before" \
        >"$t/smaps_rollup"
    awk '{ a[NR] = $0 } /^[0-9a-f]+-/ { last = NR }
         END { for (i = 1; i <= last + 1; i++) print a[i] }' "$src/smaps.before" >"$t/smaps"
    awk '/^VmRSS:/ { printf "VmRSS:\t   1"; exit } { print }' "$src/status.before" >"$t/status"
    sed 's/^Rss: .*/Rss:            12x4 kB/' "$src/smaps_rollup.before" >"$m/smaps_rollup"
    awk '/^[0-9a-f]+-/ && ++h == 2 { sub(/-/, "-zz") } { print }' "$src/smaps.before" >"$m/smaps"
    sed 's/^VmSwap:.*/VmSwap:\t  -5 kB/' "$src/status.before" >"$m/status"
}

capture_growth
capture_sleep
mkdir -p "$here/kthread"
cat /proc/2/status >"$here/kthread/status"
derive_bad
for f in "$here"/python_grow200/smaps_rollup.* "$here"/sleep/smaps_rollup; do
    echo "$f:" $(grep -E '^(Rss|Pss|Private_Clean|Private_Dirty|Private_Hugetlb|Swap|Anonymous):' "$f" | tr -s ' ')
done
for f in "$here"/python_grow200/status.* "$here"/sleep/status; do
    echo "$f:" $(grep -E '^(VmRSS|VmSwap|RssAnon):' "$f" | tr -s ' \t' ' ')
done
echo "addr: $(cat "$here/python_grow200/addr")"
