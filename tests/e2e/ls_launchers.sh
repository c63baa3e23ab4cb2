#!/bin/sh
# Rank identity from every launcher ranktop knows: Python processes started with each
# launcher's variables are found through /proc with the rank, local rank, world size and the
# launcher's name (`ls --json`), the precedence between launchers holds, and a real Open MPI
# job (`mpirun`, Debian's openmpi-bin) shows ranks 0..N-1 of world N as `openmpi`.
. "$(dirname "$0")/lib.sh"

LS="$RANKTOP_BIN ls --json --no-device-libs --nvidia-smi /nonexistent/nvidia-smi --npu-smi /nonexistent/npu-smi"
BLOCK='import time
while True: time.sleep(1)'

# start_env VAR=VALUE...: a sleeping Python process whose environment holds only these
# variables (and PATH/HOME for the interpreter), so nothing from the test's own environment
# decides its identity. Sets LAST to its pid.
start_env() {
    env -i PATH="$PATH" HOME="${HOME:-/root}" "$@" python3 -S -c "$BLOCK" &
    LAST=$!
    PIDS="$PIDS $LAST"
}

# expect_ident PID RANK LOCAL WORLD LAUNCHER ("None" for unknown): asserts ls.json's record.
expect_ident() {
    json_check "$WORK/ls.json" "[(p['rank'], p['local_rank'], p['world_size'], p['launcher']) \
for p in d['processes'] if p['pid'] == $1] == [($2, $3, $4, '$5')]"
}

start_env RANK=100 LOCAL_RANK=1 WORLD_SIZE=200; P_TORCH=$LAST
start_env OMPI_COMM_WORLD_RANK=101 OMPI_COMM_WORLD_LOCAL_RANK=2 OMPI_COMM_WORLD_SIZE=201 \
    PMIX_RANK=101; P_OMPI=$LAST
start_env PMI_RANK=102 PMI_SIZE=202 MPI_LOCALRANKID=3; P_MPICH=$LAST
start_env PMIX_RANK=103 PMIX_LOCAL_RANK=4 PMIX_SIZE=203; P_PMIX=$LAST
start_env MV2_COMM_WORLD_RANK=104 MV2_COMM_WORLD_LOCAL_RANK=5 MV2_COMM_WORLD_SIZE=204; P_MV2=$LAST
start_env HOROVOD_RANK=105 HOROVOD_LOCAL_RANK=6 HOROVOD_SIZE=205; P_HVD=$LAST
start_env SLURM_PROCID=106 SLURM_LOCALID=7 SLURM_NTASKS=206; P_SLURM=$LAST
# torchrun under srun: the Slurm task's variables must not leak into the rank's identity.
start_env SLURM_PROCID=1 SLURM_LOCALID=0 SLURM_NTASKS=2 RANK=107 WORLD_SIZE=207; P_SRUN=$LAST

all_found() {
    $LS > "$WORK/ls.json" 2>/dev/null || return 1
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
want = set(int(p) for p in sys.argv[2:])
sys.exit(0 if want <= {p["pid"] for p in d["processes"]} else 1)' "$WORK/ls.json" \
        $P_TORCH $P_OMPI $P_MPICH $P_PMIX $P_MV2 $P_HVD $P_SLURM $P_SRUN
}
wait_for all_found || fail "not every launcher's process was discovered: $(cat "$WORK/ls.json")"
expect_ident $P_TORCH 100 1 200 torchrun
expect_ident $P_OMPI 101 2 201 openmpi
expect_ident $P_MPICH 102 3 202 mpich
expect_ident $P_PMIX 103 4 203 pmix
expect_ident $P_MV2 104 5 204 mvapich2
expect_ident $P_HVD 105 6 205 horovod
expect_ident $P_SLURM 106 7 206 slurm
expect_ident $P_SRUN 107 None 207 torchrun
$RANKTOP_BIN ls --no-device-libs --nvidia-smi /nonexistent/nvidia-smi --npu-smi /nonexistent/npu-smi \
    -p $P_MV2 > "$WORK/ls.txt" 2>/dev/null || fail "ls -p $P_MV2 failed"
grep -Eq "^104 +5 +204 +mvapich2 +$P_MV2 " "$WORK/ls.txt" || fail "text table: $(cat "$WORK/ls.txt")"
# `dump` names the rank by the same precedence.
$RANKTOP_BIN dump --json -p $P_HVD > "$WORK/dump.json" 2>/dev/null || fail "dump -p $P_HVD failed"
json_check "$WORK/dump.json" "d['processes'][0]['rank'] == 105"
echo "ok: every launcher's variables"

# A real Open MPI job. As root mpirun needs --allow-run-as-root; --oversubscribe lets it
# start more ranks than cores; an empty rsh agent keeps it from looking for ssh (one node).
N=3
if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: mpirun not found (install openmpi-bin)"
    exit 77
fi
MPIRUN="mpirun --allow-run-as-root --oversubscribe --mca plm_rsh_agent '' -np $N"
if ! eval "timeout 60 $MPIRUN python3 -S -c 'pass'" > "$WORK/mpi_probe.log" 2>&1; then
    echo "SKIP: mpirun cannot start a local job here: $(tail -5 "$WORK/mpi_probe.log")"
    exit 77
fi
eval "setsid $MPIRUN python3 -S -c \"\$BLOCK\"" > "$WORK/mpi.log" 2>&1 &
MPI=$!
PIDS="$PIDS $MPI"

mpi_ranks() {
    $LS --children-of $MPI > "$WORK/ls.json" 2>/dev/null || return 1
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
ranks = sorted(p["rank"] for p in d["processes"] if p["python"] and p["rank"] is not None)
sys.exit(0 if ranks == list(range(int(sys.argv[2]))) else 1)' "$WORK/ls.json" $N
}
wait_for mpi_ranks || fail "mpirun's $N ranks not found: $(cat "$WORK/ls.json"; tail "$WORK/mpi.log")"
json_check "$WORK/ls.json" "all(p['world_size'] == $N and p['launcher'] == 'openmpi' and p['alive'] \
and p['local_rank'] == p['rank'] for p in d['processes'] if p['python'])"
# Discovery without --children-of finds them too (Open MPI sets no RANK).
MPI_PIDS=$(python3 -c 'import json,sys
print(",".join(str(p["pid"]) for p in json.load(open(sys.argv[1]))["processes"] if p["python"]))' \
    "$WORK/ls.json")
$LS > "$WORK/all.json" 2>/dev/null || fail "ls without names found nothing"
json_check "$WORK/all.json" "{p['pid'] for p in d['processes'] if p['launcher'] == 'openmpi'} >= {$MPI_PIDS}"
echo "ok: mpirun -np $N"
