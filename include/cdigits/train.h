/*
 * Training: the solver (one fused backend update per parameter tensor, its rate from
 * cdigits/lr_policy.h), snapshots with solver state, and the training task that ties a
 * dataset, a network and a solver together and reports JSON lines.
 */
#ifndef CDIGITS_TRAIN_H
#define CDIGITS_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "cdigits/augment.h"
#include "cdigits/lr_policy.h"
#include "cdigits/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- solver ------------------------------------------------------------------ */

typedef struct cd_solver_opts {
    int type;               /* enum cd_solver_type */
    double momentum, momentum2, weight_decay, delta, rms_decay;
    int reg;                /* enum cd_reg_type */
    int iter_size;          /* batch accumulation */
    double loss_scale;      /* the loss was multiplied by this (0 or 1: none) */
    cd_lr_policy lr;
} cd_solver_opts;

int cd_solver_type_parse(const char *name); /* "SGD", "ADAM", ...; -1 if unknown */
const char *cd_solver_type_name(int type);
const char *cd_solver_type_list(void);
/* DIGITS's defaults for a solver type and base rate: momentum 0.9 (none for ADAGRAD
 * and RMSPROP), weight decay base_lr/100, rms_decay 0.99, delta 1e-8, momentum2 0.999,
 * no loss scale. The learning-rate policy other than base_lr is left as it is. */
void cd_solver_opts_defaults(cd_solver_opts *o, int type, double base_lr);

/* Apply one update to every learnable parameter of net from the gradients accumulated
 * over iter_size passes, then zero the gradients. Returns the learning rate used. */
double cd_solver_step(cd_net *net, const cd_solver_opts *o, long iter);

/* ---- snapshots --------------------------------------------------------------- */

/* Weights (every parameter, stored statistics included) to path, atomically. */
int cd_snapshot_save_weights(const cd_net *net, const char *path, char *err, size_t errlen);
/* One tensor of a weights file from host memory (a network imported from another format,
 * which no net holds yet): name "<layer>/<index>" as a net names its parameters. */
typedef struct cd_weights_tensor {
    const char *name;
    int ndim;
    const int *dims;   /* ndim of them */
    size_t count;
    const float *data;
} cd_weights_tensor;
/* The same file as cd_snapshot_save_weights, of the n tensors t. */
int cd_weights_save(const cd_weights_tensor *t, int n, const char *path, char *err, size_t errlen);
/* Load weights by parameter name. Missing or differently shaped parameters are an
 * error unless allow_partial, in which case they keep their values and *loaded says
 * how many tensors were taken. A Caffe .caffemodel (told by its bytes) is read by
 * cd_caffemodel_load with Caffe's rules instead (include/cdigits/caffemodel.h). */
int cd_snapshot_load_weights(cd_net *net, const char *path, int allow_partial, int *loaded,
                             char *err, size_t errlen);
/* Solver state: the iteration and every history tensor. */
int cd_snapshot_save_state(const cd_net *net, long iter, const char *path, char *err, size_t errlen);
int cd_snapshot_load_state(cd_net *net, long *iter, const char *path, char *err, size_t errlen);

/* ---- the training task ---------------------------------------------------------- */

typedef struct cd_train_config {
    char dataset_dir[4096];
    char network[4096];      /* path of the prototxt */
    char job_dir[4096];
    double epochs;
    double snapshot_interval; /* epochs; 0: only at the end */
    int snapshots;            /* 0: none at all, the last and a stop's included ("snapshots": false) */
    double validation_interval; /* epochs; 0: only at the end */
    int has_seed;
    uint64_t seed;
    int batch_size;          /* 0: the network's */
    int batch_auto;          /* batch_size "auto": the largest batch that fits */
    int precision;           /* enum cd_precision */
    int early_stop_patience; /* validations without a better val loss; 0: off */
    double early_stop_min_delta;
    int iter_size;           /* batch accumulation */
    cd_solver_opts solver;
    int use_mean;            /* 0 none, 1 image, 2 pixel */
    int crop_size;           /* 0: the network's transform_param or none */
    int mirror;              /* -1: the network's transform_param */
    int flip;                /* random flips drawn per image: CD_FLIP_LR and/or CD_FLIP_UD,
                              * on top of mirror (which is CD_FLIP_LR) */
    cd_aug_config aug;       /* DIGITS's augmentations of the training images (augment.h):
                              * quad_rotation, rotation, rescale, noise, contrast,
                              * whitening, hsv_shift and hsv_h/_s/_v */
    int shuffle;             /* 1 (the default): a new order of the training images every
                              * epoch; 0: the dataset's stored order */
    int backend;             /* enum cd_backend_kind (backend_select.h): auto, cpu, cuda */
    int gpus[16];
    int ngpus;
    int resume;
    char pretrained[4096];   /* weights to start from ("" for none) */
    int loader_threads;      /* 0: automatic */
    int replicas;            /* data-parallel CPU replicas in this process (threads); 0, 1: one */
    int data_parallel;       /* with several GPUs: one replica per GPU (1, the default) or
                              * only the first GPU (0) */
    int force_data_parallel; /* the data-parallel path (a group, bucketed averaging, an NCCL
                              * communicator on a GPU) even for one replica: tests it */
    double bucket_mb;        /* data parallel: gradients averaged in buckets of this many
                              * MiB, each started as soon as the backward has written it;
                              * 0: one average after the backward pass */
    int threads;             /* CPU backend threads; 0: all cores */
    double cpu_memory_mb;    /* > 0: cap on each CPU backend's memory (batch halving and
                              * batch_size auto then work as on a GPU) */
    long max_iter_override;  /* > 0: stop after this many iterations (tests, benchmarks) */
} cd_train_config;

enum { CD_MEAN_NONE = 0, CD_MEAN_IMAGE = 1, CD_MEAN_PIXEL = 2 };

void cd_train_config_init(cd_train_config *c);
/* Read JOBDIR/train.json (docs/worker-protocol.md) over the defaults. */
int cd_train_config_load(cd_train_config *c, const char *job_dir, char *err, size_t errlen);
/* The train command's options after JOBDIR (argc of them), each overriding its key of
 * train.json (docs/worker-protocol.md): --resume (resume: true), --gpus LIST (gpus: the
 * comma-separated numbers), --backend auto|cpu|cuda (backend). Call it after
 * cd_train_config_load. CD_OK, or CD_ERR with a message naming the argument: a usage
 * error. */
int cd_train_config_args(cd_train_config *c, int argc, char **argv, char *err, size_t errlen);

/* Run the training task; returns the worker exit status (0 done, 1 failed, 3 stopped
 * by a signal after saving a snapshot). Reports JSON lines on stdout. */
int cd_train_run(const cd_train_config *c);

/* cd_train_run as one rank of a group of processes (g: the MPI group, mpi_group.h): this
 * process trains replica cd_group_rank(g) of cd_group_size(g) on its slice of every batch,
 * with rank 0's seed, on the GPU of its local rank (gpus[local_rank], else GPU
 * local_rank) when every rank has one, else on the CPU with the host's cores divided
 * among its ranks. Rank 0 reports, validates and snapshots; the others print errors
 * only. The exit status is cd_train_run's; a rank that fails ends every rank
 * (cd_group_abort). */
typedef struct cd_group cd_group_t;
int cd_train_run_rank(const cd_train_config *c, cd_group_t *g);

/* Ask a running cd_train_run to snapshot and stop (async-signal-safe). */
void cd_train_request_stop(void);

#ifdef __cplusplus
}
#endif
#endif
