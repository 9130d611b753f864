/* The job folder: the name of every file a job keeps there, and the snapshot rules
 * (which snapshots a folder holds, the newest complete one, the one an epoch names).
 * Backend-free and without jansson (src/common), so the worker, the scheduler, the
 * server and tests/gpu/run.sh's build all use the same names and rules.
 *
 * The epoch rule. DIGITS's snapshot_epoch is one of the values it listed for the job
 * (the epochs of its snapshots, as shown) sent back as it was shown; DIGITS looks the
 * snapshot up by equality with that value. Our lists print epochs with 3 decimals
 * ("snapshots" of /models/<id>/json), so equality with the stored float would refuse
 * every value a person copies from them. jobdir_epoch_pick therefore takes the text as
 * typed: the nearest snapshot, when it is as close as the precision of the text (half a
 * unit of its last decimal, at least 5e-4; "2.133" and "2.13" both name 2.1333333) and
 * closer than half the gap to any other snapshot, so that no value ever names two. A
 * fixed window (the 1e-3 the classifier and the inference routes used) refuses "2.13"
 * and, with snapshots closer than 1e-3 apart, names whichever came first or last. */
#pragma once

#include <stddef.h>

/* Files a job folder holds, by role. */
typedef enum jobdir_file {
    JOBDIR_TRAIN_JSON,   /* train.json: a model job's configuration (docs/worker-protocol.md) */
    JOBDIR_DATASET_JSON, /* dataset.json: a dataset job's configuration */
    JOBDIR_NETWORK,      /* network.prototxt: the model's network, DIGITS's one-file form */
    JOBDIR_LABELS,       /* labels.txt: class names, line n is label n */
    JOBDIR_MEAN_BIN,     /* mean.bin: the mean image (docs/formats.md) */
    JOBDIR_MEAN_PNG,     /* mean.png: the same as a picture */
    JOBDIR_WORKER_OUT,   /* worker.out.jsonl: the worker's lines (docs/worker-protocol.md) */
    JOBDIR_WORKER_ERR,   /* worker.err.log: the worker's stderr */
    JOBDIR_INFO_JSON,    /* info.json: an imported or downloaded model's description */
    JOBDIR_STATS_JSON,   /* stats.json: a dataset's counts per split and class */
    JOBDIR_TRAIN_DB,     /* train.db, val.db, test.db: a dataset's records per split, in */
    JOBDIR_VAL_DB,       /* the order of enum cd_split (JOBDIR_TRAIN_DB + split) */
    JOBDIR_TEST_DB,
    JOBDIR_DEPLOY,       /* deploy.prototxt: a downloaded model's deploy stage */
    JOBDIR_SOLVER,       /* solver.prototxt: its solver, in Caffe's form */
    JOBDIR_ORIGINAL,     /* original.prototxt: its network as trained */
    JOBDIR_TRAIN_VAL,    /* train_val.prototxt: DIGITS's name for the training network */
    JOBDIR_MEAN_JPG,     /* mean.jpg: the mean image as DIGITS names its picture */
    JOBDIR_TRAIN_LABELS_DB, /* train_labels.db, val_labels.db, test_labels.db: the label */
    JOBDIR_VAL_LABELS_DB,   /* record of each feature record of a generic dataset (a label */
    JOBDIR_TEST_LABELS_DB,  /* image, or float targets), split order as JOBDIR_TRAIN_DB */
    JOBDIR_PALETTE,      /* palette.txt: a segmentation dataset's class colours, "r g b" per
                          * line, line n is class n (docs/formats.md) */
    JOBDIR_FILE_COUNT
} jobdir_file;

/* The file's name in a job folder ("train.json"); NULL for a value out of range. */
const char *jobdir_name(jobdir_file f);
/* dir/name into buf. CD_OK, or CD_ERR when it does not fit (buf then holds "") or f is
 * out of range. */
int jobdir_path(const char *dir, jobdir_file f, char *buf, size_t len);
/* 1 when name is a weights file (its extension is the snapshots' .cdw). */
int jobdir_is_weights(const char *name);

/* The first bytes of a cdigits weights file (docs/formats.md, src/engine/snapshot.c). */
#define JOBDIR_WEIGHTS_MAGIC "CDW1"

/* What a weights file holds, told by its bytes, not its name: an upload may be called
 * anything (DIGITS's clients name cdigits weights "weights.caffemodel"). */
typedef enum jobdir_weights_kind {
    JOBDIR_WEIGHTS_CDW,     /* cdigits weights: begins with JOBDIR_WEIGHTS_MAGIC */
    JOBDIR_WEIGHTS_CAFFE,   /* Caffe's .caffemodel: a NetParameter in protobuf */
    JOBDIR_WEIGHTS_UNKNOWN, /* anything else */
} jobdir_weights_kind;

/* The kind of the len bytes at data. Caffe is recognized by a walk over the protobuf's
 * top-level fields: every one must be a field of Caffe's NetParameter with its wire
 * type, the last must end exactly at len, and one must be a layer. A cdigits file is only recognized by its
 * magic here; its reader checks the rest (version, checksum, tensors). */
jobdir_weights_kind jobdir_weights_kind_of(const void *data, size_t len);

/* The files of a snapshot: the weights (what inference needs), the solver state (what a
 * resume needs as well) and the epoch (docs/formats.md: one decimal number as text, the
 * epoch the trainer was at when it saved the snapshot; written after the other two). */
typedef enum jobdir_part { JOBDIR_WEIGHTS, JOBDIR_STATE, JOBDIR_EPOCH } jobdir_part;

/* "snapshot_iter_N.cdw", "snapshot_iter_N.solverstate" or "snapshot_iter_N.epoch", as
 * the trainer writes them. CD_OK, or CD_ERR when it does not fit or part is out of
 * range. */
int jobdir_snapshot_name(long iteration, jobdir_part part, char *buf, size_t len);
/* dir/ and the same. */
int jobdir_snapshot_path(const char *dir, long iteration, jobdir_part part, char *buf, size_t len);

/* A snapshot found in a job folder: its weights file, snapshot_iter_N.cdw (by
 * iteration, as the trainer writes them) or snapshot_epoch_N.cdw (by epoch). */
typedef struct jobdir_snapshot {
    char file[128];   /* the weights file, relative to the folder */
    long long number; /* N */
    int by_iteration; /* N counts iterations (else epochs) */
    int has_state;    /* the .solverstate beside it is readable */
    double epoch;     /* from the .epoch beside it (N itself for snapshot_epoch_N);
                       * -1 when unknown: no such file, or one that is not a number */
} jobdir_snapshot;

enum {
    JOBDIR_NEED_STATE = 1, /* only complete snapshots (weights and state): a resume */
    JOBDIR_ITER_ONLY = 2,  /* only snapshot_iter_N: the ones the trainer and inference use */
};

/* The snapshots in dir that pass flags, ascending by N (epoch snapshots before
 * iteration ones of the same N, so the newest is the trainer's own), at most max; returns how many (0 when dir can't be read). */
int jobdir_snapshots(const char *dir, int flags, jobdir_snapshot *out, int max);
/* The one with the largest N that passes flags: 1 and *out, or 0 when there is none. */
int jobdir_snapshot_newest(const char *dir, int flags, jobdir_snapshot *out);

/* Writes dir/snapshot_iter_N.epoch for epoch (>= 0, finite) with cd_write_file_atomic.
 * The trainer calls it after the weights and state are in place, so a crash never
 * leaves an epoch for a snapshot that is not there. CD_OK, or CD_ERR with errno. */
int jobdir_snapshot_epoch_write(const char *dir, long iteration, double epoch);
/* The epoch in dir/snapshot_iter_N.epoch, or -1 when the file is missing or does not
 * hold one non-negative number. */
double jobdir_snapshot_epoch_read(const char *dir, long iteration);

/* The index in epochs[0..n) that text (an epoch as a person typed or copied it) names,
 * by the rule above, or -1 when it names none (not a number, too far, or ambiguous).
 * Negative entries (epoch unknown) are never named. */
int jobdir_epoch_pick(const double *epochs, int n, const char *text);
