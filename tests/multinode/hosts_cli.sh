#!/bin/sh
# The host flags and the one-shot commands over hosts, through a scripted remote shell (no
# nodes needed): a host list that names no host is a usage error; a host given twice is asked
# once; C1 controls in a remote device name never reach ls --json raw; a host that answers a
# text dump with garbage is an error, as it is for --json; a remote shell that fails with exit 1
# is said in its own words.
. "$(dirname "$0")/../e2e/lib.sh"

# The remote shell: logs each host it is asked for, then answers as that host's ranktop would
# (c1dev: a device whose name holds U+009B, a terminal's CSI; garbage: not ranktop at all).
cat > "$WORK/rsh" << 'EOF'
host=$1
echo "$host" >> "$CALLS"
case $host in
garbage) echo "garbage"; exit 0 ;;
oldflag) printf 'usage line\nerror: unknown flag: --this-node\nSee --help\n' >&2; exit 1 ;;
zero) echo "hello there"; exit 0 ;;
sig) echo "about to die" >&2; kill -9 $$ ;;
lines) printf 'one\ntwo\nthree\nfour\n' >&2; exit 3 ;;
c1dev) printf '{"devices":[{"index":0,"name":"GPU\\u009b2Jx\\u0085y"}],"processes":[],"errors":[]}\n' ;;
*) printf '{"devices":[],"processes":[],"errors":[]}\n' ;;
esac
EOF
export CALLS="$WORK/calls"
RSH="sh $WORK/rsh"

# A list that names nobody is a mistake (it used to mean "this node only", exit 0).
printf '# only a comment\n\n' > "$WORK/comments"
: > "$WORK/empty"
for args in "--hosts=" "--hosts= " "--hosts=,,," "--hostfile=$WORK/empty" \
    "--hostfile=$WORK/comments"; do
    for cmd in ls dump record; do
        extra=""
        [ $cmd = record ] && extra="-o $WORK/x.json -d 1"
        rc=0
        # shellcheck disable=SC2086 # extra is words
        $RANKTOP_BIN $cmd "$args" $extra > "$WORK/out" 2> "$WORK/err" < /dev/null || rc=$?
        [ $rc -eq 2 ] || fail "$cmd '$args' exited $rc, not 2: $(cat "$WORK/err")"
        grep -q 'names no host' "$WORK/err" || fail "$cmd '$args': $(cat "$WORK/err")"
    done
done

# A host given twice is one host: one remote shell, one entry.
: > "$CALLS"
$RANKTOP_BIN ls --json --hosts a --hosts a,b,a --rsh "$RSH" > "$WORK/ls.json" 2> "$WORK/err" ||
    true
# (hosts are asked in parallel: the log's order is not theirs)
[ "$(sort "$CALLS" | tr '\n' ' ')" = "a b " ] || fail "remote shells started: $(cat "$CALLS")"
json_check "$WORK/ls.json" '[h["host"] for h in d["hosts"]] == ["a", "b"]'

# C1 controls from a remote device name: escaped in JSON (the same characters for a reader),
# never raw bytes on a terminal; text output shows them as \u00NN.
$RANKTOP_BIN ls --json --hosts c1dev --rsh "$RSH" > "$WORK/c1.json" 2> "$WORK/err" || true
python3 -c 'import re, sys
b = open(sys.argv[1], "rb").read()
sys.exit(1 if re.search(rb"\xc2[\x80-\x9f]", b) else 0)' "$WORK/c1.json" ||
    fail "ls --json wrote raw C1 controls: $(od -c "$WORK/c1.json" | head -5)"
json_check "$WORK/c1.json" 'd["devices"][0]["name"] == "GPU\u009b2Jx\u0085y"'
$RANKTOP_BIN ls --hosts c1dev --rsh "$RSH" > "$WORK/c1.txt" 2>&1 || true
python3 -c 'import re, sys
sys.exit(1 if re.search(rb"\xc2[\x80-\x9f]", open(sys.argv[1], "rb").read()) else 0)' \
    "$WORK/c1.txt" || fail "ls wrote raw C1 controls"

# A host that answers a dump with garbage: an error naming it, in text as in JSON.
for fmt in "" --json; do
    rc=0
    $RANKTOP_BIN dump $fmt --hosts garbage --rsh "$RSH" > "$WORK/out" 2> "$WORK/err" || rc=$?
    [ $rc -ne 0 ] || fail "dump $fmt: garbage from a host, exit 0: $(cat "$WORK/out")"
    grep -q 'garbage: the remote ranktop did not answer with a dump' "$WORK/err" ||
        fail "dump $fmt: no error naming the host: $(cat "$WORK/err")"
done

# A remote shell that fails with exit 1 and no JSON (kubectl's unknown flag) is said in its own
# words with its status, in ls and dump, JSON and text; "a different version?" is kept for a
# remote end that exited 0 with something else.
WORDS='sh exited with status 1: usage line | error: unknown flag: --this-node | See --help'
$RANKTOP_BIN ls --json --hosts oldflag,garbage --rsh "$RSH" > "$WORK/ls.json" 2> /dev/null || true
json_check "$WORK/ls.json" "[h.get('error') for h in d['hosts']] == ['$WORDS', 'the remote ranktop did not answer with ls JSON (a different version?)']"
for fmt in "" --json; do
    $RANKTOP_BIN dump $fmt --hosts oldflag --rsh "$RSH" > "$WORK/out" 2> "$WORK/err" || true
    grep -qxF "ranktop dump: oldflag: $WORDS" "$WORK/err" || fail "dump $fmt: $(cat "$WORK/err")"
done
json_check "$WORK/out" "d['processes'][0]['error'] == '$WORDS'"

# The agents' launchers too (record, the monitor): each host's error is how its remote shell
# ended (status or signal) and its last three stderr lines.
rc=0
$RANKTOP_BIN record -o "$WORK/rec.json" -d 2 --hosts zero,sig,lines --rsh "$RSH" \
    > "$WORK/out" 2> "$WORK/err" < /dev/null || rc=$?
[ $rc -eq 1 ] || fail "record of nothing exited $rc: $(cat "$WORK/err")"
for want in "zero: down, .*; last error: sh exited with status 0 before its agent said hello \(a different version\?\)$" \
    "sig: down, .*; last error: sh was killed by signal 9: about to die$" \
    "lines: down, .*; last error: sh exited with status 3: two \| three \| four$"; do
    grep -Eq "^ranktop: host $want" "$WORK/err" || fail "record: no /$want/: $(cat "$WORK/err")"
done
echo ok
