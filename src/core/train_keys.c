/* The training settings' table (include/cdigits/train_keys.h) and the lookups, messages
 * and range check that the worker and the server share. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cdigits/lr_policy.h"
#include "cdigits/train_keys.h"
#include "cdigits/util.h"

#define NONE NAN
/* the largest weight decay; a learning rate's bound keeps weight decay's default, the
 * rate / 100, within it */
#define MAX_DECAY 1e3

/* Rows by kind: bounds and a default where the kind has them. */
#define NUM(key, field, lo, hi, def, label, doc) {key, field, CD_TK_NUMBER, lo, hi, 0, def, NULL, NULL, label, doc}
#define INT(key, field, lo, hi, def, label, doc) {key, field, CD_TK_INT, lo, hi, 0, def, NULL, NULL, label, doc}
#define BOOL(key, field, def, label, doc) {key, field, CD_TK_BOOL, NONE, NONE, 0, def, NULL, NULL, label, doc}
#define ENUM(key, field, choices, alias, def, label, doc) \
    {key, field, CD_TK_ENUM, NONE, NONE, 0, def, choices, alias, label, doc}
#define STR(key, field, label, doc) {key, field, CD_TK_STRING, NONE, NONE, 0, NULL, NULL, NULL, label, doc}
#define LIST(key, field, lo, hi, max, def, label, doc) {key, field, CD_TK_LIST, lo, hi, max, def, NULL, NULL, label, doc}
/* A policy's parameter set by field, with the policy's default (lr_policy.h): each of
 * lr_policy.stepsize, gamma and power has one set of bounds for every policy. */
#define STEP(field, def, label, doc) NUM("lr_policy.stepsize", field, 0, 100, CD_LR_TEXT(def), label, doc)
#define GAMMA(field, def, doc) NUM("lr_policy.gamma", field, 0, 1e6, CD_LR_TEXT(def), "Gamma", doc)
#define POWER(field, def, doc) NUM("lr_policy.power", field, 0, 1e6, CD_LR_TEXT(def), "Power", doc)

/* DIGITS's names and defaults (digits/model/forms.py) where the form has the setting;
 * the worker's bounds, which the form now shares. Enum choices are in the order of the
 * worker's values (enum cd_solver_type, cd_lr_type, cd_precision, cd_backend_kind,
 * cd_aug_quad; a flip choice is its CD_FLIP_* bits). */
static const cd_train_key g_keys[] = {
    /* what to train */
    STR("dataset_dir", "dataset", "Dataset", "the dataset job's folder (the form names the job by its id); required"),
    STR("network", NULL, "Network",
        "the network's prototxt, relative to the job folder; without it, the job's network.prototxt"),
    STR("pretrained", "custom_network_snapshot", "Pretrained model",
        "weights (.cdw) to start from: tensors whose names and shapes match are taken"),
    /* how long */
    NUM("epochs", "train_epochs", 1e-6, 1e6, "30", "Training epochs",
        "passes over the training images (the form takes whole epochs, train.json fractions too)"),
    NUM("snapshot_interval", "snapshot_interval", 0, 1e6, "1", "Snapshot interval (in epochs)",
        "epochs between snapshots; 0: only after the last iteration"),
    NUM("validation_interval", "val_interval", 0, 1e6, "1", "Validation interval (in epochs)",
        "epochs between validations; 0: only after the last iteration"),
    BOOL("snapshots", NULL, "true", "Snapshots",
         "at each snapshot interval and after the last iteration; false: none at all, on a stop neither"),
    INT("max_iterations", NULL, 1, 1e12, NULL, "Maximum iterations", "stop after this many iterations (tests)"),
    INT("early_stopping_patience", "early_stopping_patience", 0, 1e6, "0", "Early stopping patience",
        "stop after this many validations without a better val loss; 0: off"),
    NUM("early_stopping_min_delta", "early_stopping_min_delta", 0, 1e9, "0", "Early stopping minimum change",
        "how much lower than the best a val loss must be to count as better"),
    BOOL("resume", NULL, "false", "Resume",
         "continue from the newest complete snapshot (the train command's --resume)"),
    /* batches */
    INT("batch_size", "batch_size", 1, 1 << 20, NULL, "Batch size",
        "images per iteration, or \"auto\": the largest batch that fits; without it, the network's"),
    INT("batch_accumulation", "batch_accumulation", 1, 1024, "1", "Batch accumulation",
        "batches whose gradients are added up before each solver step"),
    INT("random_seed", "random_seed", 0, 4294967295.0, NULL, "Random seed",
        "the seed of the fillers, the data order, crops, flips and dropout; without it, one from the clock"),
    BOOL("shuffle", "shuffle", "true", "Shuffle train data",
         "a new order of the training images every epoch; false: the dataset's stored order"),
    INT("loader_threads", NULL, 1, 64, NULL, "Loader threads",
        "threads that read and decode batches; without it, automatic (more while the step waits)"),
    /* the solver */
    ENUM("solver_type", "solver_type", "SGD|NESTEROV|ADAGRAD|RMSPROP|ADADELTA|ADAM", NULL, "SGD", "Solver type",
         "the update rule, as Caffe's"),
    NUM("learning_rate", "learning_rate", 0, MAX_DECAY * 100, "0.01", "Base learning rate",
        "the rate the policy starts from; the form's comma list makes one job per rate"),
    NUM("momentum", "momentum", 0, 1, NULL, "Momentum", "without it, 0.9 (0 for ADAGRAD and RMSPROP)"),
    NUM("weight_decay", "weight_decay", 0, MAX_DECAY, NULL, "Weight decay", "without it, the base learning rate / 100"),
    NUM("rms_decay", "rms_decay", 0, 1, "0.99", "RMS decay value", "RMSPROP's decay of the mean square"),
    NUM("momentum2", NULL, 0, 1, "0.999", "Momentum 2", "ADAM's decay of the second moment"),
    NUM("delta", NULL, 0, 1, "1e-8", "Delta", "ADAGRAD, RMSPROP, ADADELTA and ADAM: added to the denominator"),
    /* the learning-rate policy: percents of the whole training, as in DIGITS */
    ENUM("lr_policy.policy", "lr_policy", "fixed|step|multistep|exp|inv|poly|sigmoid", NULL, "step", "Policy",
         "how the rate changes during training (Learning-rate policies above)"),
    STEP("lr_step_size", CD_LR_DEFAULT_STEP_SIZE, "Step size (% of training)",
         "for step, the percent of training between two steps"),
    STEP("lr_sigmoid_step", CD_LR_DEFAULT_SIGMOID_STEP, "Step (% of training)",
         "for sigmoid, the percent of training at the midpoint"),
    LIST("lr_policy.steps", "lr_multistep_values", 0, 100, CD_LR_MAX_STEPS, CD_LR_DEFAULT_MULTISTEP_VALUES,
         "Step values (% of training)", "for multistep, the percents of training where gamma multiplies the rate"),
    GAMMA("lr_step_gamma", CD_LR_DEFAULT_STEP_GAMMA, "for step, the factor at each step"),
    GAMMA("lr_multistep_gamma", CD_LR_DEFAULT_MULTISTEP_GAMMA, "for multistep, the factor at each step"),
    GAMMA("lr_exp_gamma", CD_LR_DEFAULT_EXP_GAMMA, "for exp, the factor per percent of training"),
    GAMMA("lr_inv_gamma", CD_LR_DEFAULT_INV_GAMMA, "for inv, how fast the rate falls"),
    GAMMA("lr_sigmoid_gamma", CD_LR_DEFAULT_SIGMOID_GAMMA, "for sigmoid, how steep the fall is"),
    POWER("lr_inv_power", CD_LR_DEFAULT_INV_POWER, "for inv, the exponent of the fall"),
    POWER("lr_poly_power", CD_LR_DEFAULT_POLY_POWER, "for poly, the exponent of the fall to 0"),
    /* the images */
    ENUM("use_mean", "use_mean", "none|image|pixel", NULL, "image", "Subtract mean",
         "the dataset's mean image, one mean per channel, or nothing"),
    INT("crop_size", "crop_size", 1, 1 << 16, NULL, "Crop size",
        "random square crops of this size (centered for validation); without it, the network's"),
    BOOL("use_mirror", "use_mirror", NULL, "Mirror images",
         "random left-right flips of half the images; without it, the network's transform_param"),
    ENUM("flip", "aug_flip", "none|fliplr|flipud|fliplrud", NULL, "none", "Flipping",
         "random flips on top of use_mirror, each drawn for half the training images"),
    /* DIGITS's data augmentations (cdigits/augment.h), drawn per training image */
    ENUM("quad_rotation", "aug_quad_rot", "none|rot90|rot180|rotall", NULL, "none", "Quadrilateral rotation",
         "random quarter turns of each training image: rot90 0, 90 or 270 degrees, rot180 0 or 180, rotall any"),
    INT("rotation", "aug_rot", 0, 180, "0", "Rotation (+- deg)",
        "a uniform random rotation of each training image within +- this many degrees, edges repeated"),
    NUM("rescale", "aug_scale", 0, 1, "0", "Rescale (stddev)",
        "keeping the image size, each training image is zoomed by 1 + N(0, this) and moved as far; try 0.07"),
    NUM("noise", "aug_noise", 0, 1, "0", "Noise (stddev)",
        "added white Gaussian noise of this stddev on the [0 1] pixel range; try 0.03"),
    NUM("contrast", "aug_contrast", 0, 5, "0", "Contrast (factor)",
        "per channel (x - mean) * f + mean with f uniform in [1 - this, 1 + this]; try 0.8"),
    BOOL("whitening", "aug_whitening", "false", "Whitening",
         "per-image whitening of the training images: minus their own mean, divided by their own stddev"),
    BOOL("hsv_shift", "aug_hsv_use", "false", "HSV shifting",
         "normal random shifts of hue, saturation and value by the stddevs below ([0 1] range)"),
    NUM("hsv_h", "aug_hsv_h", 0, 0.5, "0.02", "Hue", "with hsv_shift, the stddev of the hue shift"),
    NUM("hsv_s", "aug_hsv_s", 0, 0.5, "0.04", "Saturation", "with hsv_shift, the stddev of the saturation shift"),
    NUM("hsv_v", "aug_hsv_v", 0, 0.5, "0.06", "Value", "with hsv_shift, the stddev of the value shift"),
    /* where it runs */
    ENUM("backend", NULL, "auto|cpu|cuda", "gpu=cuda", "auto", "Backend",
         "where to train; auto: a usable GPU, else the CPU (the train command's --backend)"),
    LIST("gpus", NULL, 0, 1023, 16, NULL, "GPUs", "the GPUs to train on, each once (the train command's --gpus)"),
    ENUM("precision", "precision", "fp32|tf32|fp16|bf16", NULL, "fp32", "Precision",
         "the arithmetic of convolutions and matrix products on GPUs (Precision above)"),
    BOOL("data_parallel", "data_parallel", "true", "Data parallelism",
         "one replica per GPU; false: the first GPU only"),
    BOOL("force_data_parallel", NULL, "false", "Force data parallelism",
         "the data-parallel path even for one replica or GPU (tests)"),
    INT("replicas", NULL, 1, 64, NULL, "CPU replicas", "data-parallel CPU replicas in one process"),
    NUM("allreduce_bucket_mb", NULL, 0, 4096, "25", "All-reduce bucket (MiB)",
        "data parallel: gradients averaged in buckets of this size as the backward runs; 0: once at its end"),
    INT("threads", NULL, 1, 1024, NULL, "CPU threads", "the CPU backend's threads; without it, every core"),
    NUM("cpu_memory_mb", NULL, 0.001, 1e9, NULL, "CPU memory (MiB)",
        "a cap on each CPU backend's memory, past which allocations fail as on a full GPU"),
};

size_t cd_train_key_count(void) { return CD_ARRAY_LEN(g_keys); }

const cd_train_key *cd_train_key_at(size_t i) { return i < CD_ARRAY_LEN(g_keys) ? &g_keys[i] : NULL; }

const cd_train_key *cd_train_key_find(const char *key)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_keys); i++)
        if (!strcmp(g_keys[i].key, key))
            return &g_keys[i];
    return NULL;
}

const cd_train_key *cd_train_key_by_field(const char *field)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_keys); i++)
        if (g_keys[i].field && !strcmp(g_keys[i].field, field))
            return &g_keys[i];
    return NULL;
}

const char *cd_train_key_member(const cd_train_key *k)
{
    const char *dot = strrchr(k->key, '.');
    return dot ? dot + 1 : k->key;
}

const char *cd_train_key_type_name(int type)
{
    static const char *const names[CD_TK_TYPE_COUNT] = {
        [CD_TK_NUMBER] = "number", [CD_TK_INT] = "int",       [CD_TK_BOOL] = "bool",
        [CD_TK_ENUM] = "enum",     [CD_TK_STRING] = "string", [CD_TK_LIST] = "list",
    };
    return type >= 0 && type < CD_TK_TYPE_COUNT ? names[type] : "?";
}

/* The n-th "|"-separated word of s: its start and length; 0 when s has fewer. */
static int nth_word(const char *s, int n, const char **start, size_t *len)
{
    for (int i = 0; s; i++) {
        const char *bar = strchr(s, '|');
        if (i == n) {
            *start = s;
            *len = bar ? (size_t)(bar - s) : strlen(s);
            return 1;
        }
        s = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* The index of the word name[0..n) among the "|"-separated choices, case-insensitively;
 * -1 when it is none of them. */
static int choice_of(const char *choices, const char *name, size_t n)
{
    const char *w;
    size_t len;
    for (int i = 0; choices && nth_word(choices, i, &w, &len); i++)
        if (len == n && !strncasecmp(w, name, n))
            return i;
    return -1;
}

int cd_train_key_choice(const cd_train_key *k, const char *name)
{
    if (!name)
        return -1;
    int i = choice_of(k->choices, name, strlen(name));
    const char *w;
    size_t len;
    /* aliases, "gpu=cuda|...": the name before "=" is the choice after it */
    for (int a = 0; i < 0 && k->alias && nth_word(k->alias, a, &w, &len); a++) {
        const char *eq = memchr(w, '=', len);
        if (eq && (size_t)(eq - w) == strlen(name) && !strncasecmp(w, name, (size_t)(eq - w)))
            i = choice_of(k->choices, eq + 1, len - (size_t)(eq + 1 - w));
    }
    return i;
}

const char *cd_train_key_choice_name(const cd_train_key *k, int i, char *buf, size_t len)
{
    const char *w;
    size_t n;
    if (len)
        buf[0] = 0;
    if (k->choices && i >= 0 && nth_word(k->choices, i, &w, &n))
        snprintf(buf, len, "%.*s", (int)n, w);
    return buf;
}

const char *cd_train_key_choice_list(const cd_train_key *k, const char *sep, char *buf, size_t len)
{
    const char *w;
    size_t n, used = 0;
    if (len)
        buf[0] = 0;
    for (int i = 0; k->choices && nth_word(k->choices, i, &w, &n) && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%.*s", i ? sep : "", (int)n, w);
    return buf;
}

const char *cd_train_key_want(const cd_train_key *k, char *buf, size_t len)
{
    char list[256];
    switch (k->type) {
    case CD_TK_NUMBER:
        snprintf(buf, len, "a number between %.15g and %.15g", k->lo, k->hi);
        break;
    case CD_TK_INT:
        snprintf(buf, len, "a whole number between %.15g and %.15g", k->lo, k->hi);
        break;
    case CD_TK_BOOL:
        snprintf(buf, len, "true or false");
        break;
    case CD_TK_ENUM:
        snprintf(buf, len, "one of %s", cd_train_key_choice_list(k, ", ", list, sizeof list));
        break;
    case CD_TK_LIST:
        snprintf(buf, len, "numbers between %.15g and %.15g, at most %d", k->lo, k->hi, k->max_items);
        break;
    default:
        snprintf(buf, len, "text");
        break;
    }
    return buf;
}

int cd_train_key_check(const cd_train_key *k, double v, char *err, size_t errlen)
{
    int whole = k->type != CD_TK_INT || v == floor(v);
    if (!isnan(v) && whole && !(v < k->lo) && !(v > k->hi))
        return CD_OK;
    snprintf(err, errlen, "train.json: \"%s\" must be %sbetween %.15g and %.15g (got %.15g)", k->key,
             whole ? "" : "a whole number ", k->lo, k->hi, v);
    return CD_ERR;
}
