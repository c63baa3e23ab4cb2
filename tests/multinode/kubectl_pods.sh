#!/bin/sh
# Pods as hosts (--launcher kubectl) through tests/multinode/fake-kubectl, whose pods are the
# simulated nodes of nodes.sh: two pods on two nodes whose ranks have equal pids. ls, dump and
# record see both ranks, each on its pod and node; --selector takes the Running pods of a
# label, an empty selection is an error; inside a pod (KUBERNETES_SERVICE_HOST) the pods of its
# own job are used; a missing pod is reported with kubectl's own words; the monitor shows
# POD@NODE in the HOST column and "POD (NODE)" in the Hosts view, + reaches the agents (their
# stdin is kept open), and q leaves no agent behind.
. "$(dirname "$0")/../ui/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
trap 'node_stop_all; ui_cleanup' EXIT
trap 'exit 1' INT TERM

PY="$RANKTOP_SRCDIR/tests/py/waits_in.py"
mkdir "$WORK/bin"
ln -s "$RANKTOP_SRCDIR/tests/multinode/fake-kubectl" "$WORK/bin/kubectl"
PATH=$WORK/bin:$PATH
FAKE_KUBECTL_PODS=$WORK/pods.json
FAKE_KUBECTL_LOG=$WORK/kubectl.log
export PATH FAKE_KUBECTL_PODS FAKE_KUBECTL_LOG
cat > "$FAKE_KUBECTL_PODS" << 'JSON'
[{"name": "w-1", "namespace": "train", "node": "node02", "labels": {"job-name": "train"}},
 {"name": "w-0", "namespace": "train", "node": "node01", "labels": {"job-name": "train"}},
 {"name": "w-2", "namespace": "train", "node": "node02", "labels": {"job-name": "train"},
  "phase": "Pending"},
 {"name": "solo", "namespace": "train", "node": "node01", "labels": {"app": "x"}},
 {"name": "w-0", "namespace": "default", "node": "node02", "labels": {"job-name": "train"}}]
JSON
node_start node01 || exit $?
node_start node02 || exit $?
node_spawn node01 env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 "$PY" all_reduce < /dev/null
node_spawn node02 env RANK=1 LOCAL_RANK=0 WORLD_SIZE=2 python3 "$PY" load_batch_slowly < /dev/null
K="--launcher kubectl -n train --remote-ranktop $RANKTOP_BIN --no-device-libs"

# ls over two named pods: both ranks, each on its pod and node, the same pid on both.
both_listed() {
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" ls --json --hosts w-0,w-1 $K > "$WORK/ls.json" 2> "$WORK/ls.err"
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(sorted((p["host"], p["node"], p["rank"]) for p in d["processes"]) != [("w-0", "node01", 0), ("w-1", "node02", 1)])' "$WORK/ls.json"
}
wait_for both_listed || fail "ls: both pods' ranks not listed: $(cat "$WORK/ls.json" "$WORK/ls.err")"
json_check "$WORK/ls.json" "len({p['pid'] for p in d['processes']}) == 1"
json_check "$WORK/ls.json" "[(h['host'], h['node'], h['ok']) for h in d['hosts']] == [('w-0', 'node01', True), ('w-1', 'node02', True)]"
# The agent was started as kubectl wants it: the pod, -n, then "--" before ranktop's words.
grep -q "^\[\"exec\", \"-i\", \"w-0\", \"-n\", \"train\", \"--\", \"$RANKTOP_BIN\", \"ls\"" \
    "$WORK/kubectl.log" || fail "kubectl exec argv: $(cat "$WORK/kubectl.log")"

# Without that "--" kubectl takes the agent's flags for its own, as the fake does too.
run_rc 1 kubectl exec -i w-0 -n train "$RANKTOP_BIN" ls --this-node
grep -q '^error: unknown flag: --this-node' "$WORK/err" || fail "fake kubectl: $(cat "$WORK/err")"

# A pod that does not exist: an error of its own, the other pod still listed.
# shellcheck disable=SC2086
"$RANKTOP_BIN" ls --json --hosts w-0,w-3 $K > "$WORK/miss.json" 2> /dev/null
json_check "$WORK/miss.json" "[(h['host'], h['ok']) for h in d['hosts']] == [('w-0', True), ('w-3', False)] and [p['host'] for p in d['processes']] == ['w-0']"
# ... in kubectl's own words, with its exit status.
json_check "$WORK/miss.json" "'kubectl exited with status 1' in d['hosts'][1]['error'] and 'Error from server (NotFound): pods \"w-3\" not found' in d['hosts'][1]['error']"

# --selector: the Running pods of the label (not the Pending w-2, not the other namespace's w-0).
# shellcheck disable=SC2086
"$RANKTOP_BIN" ls --json --selector job-name=train $K > "$WORK/sel.json" ||
    fail "ls --selector exited $?"
json_check "$WORK/sel.json" "[(h['host'], h['node']) for h in d['hosts']] == [('w-0', 'node01'), ('w-1', 'node02')]"
# shellcheck disable=SC2086
run_rc 2 "$RANKTOP_BIN" ls --json --selector job-name=none $K
grep -q 'no Running pod matches --selector job-name=none in namespace train' "$WORK/err" ||
    fail "empty selection: $(cat "$WORK/err")"

# dump: every rank of both pods, in its function.
# shellcheck disable=SC2086
"$RANKTOP_BIN" dump --json --selector job-name=train $K > "$WORK/dump.json" ||
    fail "dump --selector exited $?"
json_check "$WORK/dump.json" "{(p.get('host'), p['threads'][0]['frames'][0]['function']) for p in d['processes'] if p.get('threads')} == {('w-0', 'all_reduce'), ('w-1', 'load_batch_slowly')}"

# record: a lane per rank named with its pod and node.
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -o "$WORK/t.json" -d 4 -r 20 --selector job-name=train $K \
    > "$WORK/rec.out" 2>&1 || fail "record --selector exited $?: $(cat "$WORK/rec.out")"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/t.json" --lanes 2 \
    --lane-name-regex '^rank 0 \(pid [0-9]+, w-0@node01' \
    --lane-name-regex '^rank 1 \(pid [0-9]+, w-1@node02' \
    --slice all_reduce --slice load_batch_slowly || fail "trace over two pods"

# --ship into pods that have no ranktop: without it the pods say so and name the cure; with it
# the binary goes through kubectl exec -i's stdin, runs from a private directory in each pod
# and leaves nothing there. TMPDIR reaches the pods' shell through kubectl (the fake passes the
# environment), so what is left can be counted.
command -v ranktop > /dev/null && fail "a ranktop on PATH would make this case moot"
KS="--launcher kubectl -n train --no-device-libs"
# shellcheck disable=SC2086
"$RANKTOP_BIN" ls --json --hosts w-0 $KS > "$WORK/noship.json" 2> /dev/null || true
json_check "$WORK/noship.json" "not d['hosts'][0]['ok'] and '--ship sends ranktop there' in d['hosts'][0]['error']"
mkdir "$WORK/podtmp"
# shellcheck disable=SC2086
TMPDIR=$WORK/podtmp "$RANKTOP_BIN" ls --json --hosts w-0,w-1 $KS --ship > "$WORK/ship.json" \
    2> "$WORK/ship.err" || fail "ls --ship into pods exited $?: $(cat "$WORK/ship.err")"
json_check "$WORK/ship.json" "sorted((p['host'], p['rank']) for p in d['processes']) == [('w-0', 0), ('w-1', 1)]"
grep -q '^ranktop --ship: w-0: [0-9]* bytes in ' "$WORK/ship.err" || fail "no shipping figure: $(cat "$WORK/ship.err")"
grep -q '"exec", "-i", "w-1", "-n", "train", "--", "sh", "-c", ' "$WORK/kubectl.log" ||
    fail "--ship did not run the script through kubectl exec: $(tail -n 2 "$WORK/kubectl.log")"
# shellcheck disable=SC2086
TMPDIR=$WORK/podtmp "$RANKTOP_BIN" record -o "$WORK/ship.trace.json" -d 3 -r 20 --hosts w-0,w-1 \
    $KS --ship > "$WORK/shiprec.out" 2>&1 || fail "record --ship exited $?: $(cat "$WORK/shiprec.out")"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/ship.trace.json" --lanes 2 \
    --slice all_reduce --slice load_batch_slowly || fail "trace of shipped agents in pods"
left_in_pods() { [ -z "$(ls -A "$WORK/podtmp")" ]; }
wait_for left_in_pods || fail "--ship left files in the pods: $(ls -la "$WORK/podtmp")"

# Inside a pod of the job: no --hosts, no --selector, no -n: this pod's job-name label and its
# service account's namespace pick the pods.
echo train > "$WORK/namespace"
KUBERNETES_SERVICE_HOST=10.0.0.1 HOSTNAME=w-1 RANKTOP_KUBE_NAMESPACE_FILE=$WORK/namespace \
    "$RANKTOP_BIN" ls --json --launcher kubectl --remote-ranktop "$RANKTOP_BIN" \
    --no-device-libs > "$WORK/own.json" || fail "ls in a pod exited $?"
json_check "$WORK/own.json" "sorted(p['host'] for p in d['processes']) == ['w-0', 'w-1']"
KUBERNETES_SERVICE_HOST=10.0.0.1 HOSTNAME=solo RANKTOP_KUBE_NAMESPACE_FILE=$WORK/namespace \
    run_rc 2 "$RANKTOP_BIN" ls --launcher kubectl
grep -q 'this pod has no job-name' "$WORK/err" || fail "a pod without a job: $(cat "$WORK/err")"

# Usage errors: pod flags with another launcher, both --hosts and --selector, a bad namespace,
# no pods named outside a pod.
run_rc 2 "$RANKTOP_BIN" ls --launcher ssh --hosts w-0 --selector job-name=train
grep -q 'go with --launcher kubectl' "$WORK/err" || fail "--selector with ssh: $(cat "$WORK/err")"
run_rc 2 "$RANKTOP_BIN" ls --hosts w-0 --selector job-name=train
grep -q 'give one' "$WORK/err" || fail "--hosts and --selector: $(cat "$WORK/err")"
run_rc 2 "$RANKTOP_BIN" ls -n 'a;b' --hosts w-0
grep -q 'not a namespace name' "$WORK/err" || fail "a bad namespace: $(cat "$WORK/err")"
run_rc 2 env -u KUBERNETES_SERVICE_HOST "$RANKTOP_BIN" ls --launcher kubectl
grep -q 'needs --hosts or --selector' "$WORK/err" || fail "no pods: $(cat "$WORK/err")"

# The monitor: POD@NODE in the HOST column, "POD (NODE)" and kubectl's words for a missing pod
# in the Hosts view, + reaches the agents through their stdin, q leaves no agent.
ui_start kube 170 45 -- "$RANKTOP_BIN" --hosts w-0,w-1,w-3 --launcher kubectl -n train \
    --remote-ranktop "$RANKTOP_BIN" --no-device-libs
wait_screen '^ +0 +[0-9]+ +w-0@node01 ' 60 || fail "rank 0 not shown on w-0@node01"
wait_screen '^ +1 +[0-9]+ +w-1@node02 ' 60 || fail "rank 1 not shown on w-1@node02"
keys + +
wait_screen ' [2-9][0-9]\.[0-9]/40 Hz ' 60 || fail "the agents did not take the new rate"
keys 6
wait_screen '^w-0 \(node01\) +up ' 20 || fail "Hosts view: w-0 (node01) not up"
wait_screen '^w-3 +down .*pods "w-3" not found' 30 || fail "Hosts view: w-3's kubectl error"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
node_wait_no_agent 10 node01 node02 || fail "agents left after q"
echo ok
