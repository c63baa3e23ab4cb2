/* Environment variables of another process (/proc/PID/environ), and the rank identity the
 * launchers put there. */
#ifndef RANKTOP_PROCENV_H
#define RANKTOP_PROCENV_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/procenv.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stddef.h>

/* Finds NAME in an environ image (NUL-separated NAME=value entries, `len` bytes). Pure.
 * Returns a pointer into buf to the value (NUL-terminated within len) or NULL. */
const char *procenv_find(const char *buf, size_t len, const char *name);

/* Copies the value of NAME in process pid's initial environment into out (at most outlen-1
 * bytes). Returns 0, APP_E_NOTFOUND when unset, or another negative app_status. */
int procenv_get(int pid, const char *name, char *out, size_t outlen);

/* Parses a decimal int value of NAME; returns 0 and *val, or a negative status. */
int procenv_get_int(int pid, const char *name, int *val);

/* The command line, arguments joined by spaces (cut to outlen-1 bytes). */
int procenv_cmdline(int pid, char *out, size_t outlen);

/* Distributed-launcher identity from a process's environment; -1 / "" when unset.
 *
 * Launchers are tried in this order and the first one whose rank variable holds a number
 * supplies rank, local rank, world size and local world size, as a set (never mixed with a
 * later launcher's: under `srun`, torchrun's ranks all carry SLURM_LOCALID=0, which is the
 * task's, not the rank's):
 *   torchrun  RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE (torchrun, torch.distributed
 *             .launch, DeepSpeed and Accelerate all set these)
 *   openmpi   OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE, _LOCAL_SIZE
 *   mpich     PMI_RANK, MPI_LOCALRANKID, PMI_SIZE, MPI_LOCALNRANKS (MPICH, Intel MPI)
 *   pmix      PMIX_RANK, PMIX_LOCAL_RANK, PMIX_SIZE, PMIX_LOCAL_SIZE
 *   mvapich2  MV2_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE, _LOCAL_SIZE
 *   horovod   HOROVOD_RANK, _LOCAL_RANK, _SIZE, _LOCAL_SIZE
 *   slurm     SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS (last: set for every task of an
 *             allocation, distributed or not)
 * launcher names the one that supplied the identity ("" when none did). */
struct rank_ident {
    int rank, local_rank, world_size, group_rank, local_world_size;
    char launcher[16];       /* "torchrun", "openmpi", ... (see above), "" none */
    char run_id[64];         /* TORCHELASTIC_RUN_ID */
    char master_addr[64];    /* MASTER_ADDR */
    char master_port[16];    /* MASTER_PORT */
    char cuda_visible[64];   /* CUDA_VISIBLE_DEVICES */
    char ascend_visible[64]; /* ASCEND_RT_VISIBLE_DEVICES */
};

/* Pure: fills id from an environ image (NUL-separated NAME=value, len bytes; an entry cut
 * by the end of the buffer is ignored). */
void rank_ident_parse(const char *env, size_t len, struct rank_ident *id);

#endif
