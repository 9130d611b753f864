/*
 * The backend interface: every computation a layer or a solver does goes through
 * one of these slots, so each layer is written once and runs on any backend.
 *
 * A backend is { iface; device; context } in the style of ggml: iface is a table of
 * function pointers filled per backend, optional slots are NULL and the public
 * wrappers (cd_be_*, at the end of this file) check them, so the engine calls an
 * optional slot only through its wrapper and never asks which backend it has: what a
 * backend is (a device, reduced precision) is in iface->caps, and iface->name is for
 * messages only. Required slots are called directly. All float pointers passed to ops
 * are device pointers of that backend (host memory for the CPU backend). Tensors are
 * NCHW, row-major, float32 unless a slot says otherwise.
 *
 * Gradient conventions, shared by every backend:
 *  - "dx"/"data gradient" outputs are overwritten (beta = 0);
 *  - parameter gradient outputs (dw, db, dgamma, dbeta) are accumulated (+=), so
 *    batch accumulation and shared parameters need no extra buffers.
 */
#ifndef CDIGITS_BACKEND_H
#define CDIGITS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "cdigits/util.h" /* cd_mix64, cd_rand_uniform: the generator every backend shares */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cd_backend cd_backend_t;
/* one image's augmentation (cdigits/augment.h); the interface passes arrays of them */
struct cd_aug_params;
/* an in-process group of replicas (threads of one worker): group.h */
typedef struct cd_group cd_group_t;

/* Convolution geometry. x is (n,c,h,w), weights (k, c/group, kh, kw), y (n,k,oh,ow).
 * oh = (h + 2*ph - (dh*(kh-1)+1)) / sh + 1, likewise ow (the Convolution layer fills them). */
typedef struct cd_conv_desc {
    int n, c, h, w;
    int k, kh, kw;
    int sh, sw, ph, pw, dh, dw;
    int group;
    int oh, ow;
} cd_conv_desc;

enum cd_pool_mode { CD_POOL_MAX = 0, CD_POOL_AVE = 1 };

/* Pooling geometry with Caffe's rules: oh = ceil((h + 2*ph - kh) / sh) + 1, and when
 * padding is set a last window that would start in the bottom/right padding is
 * dropped ((oh-1)*sh >= h + ph: oh is one less). AVE divides by the window size clipped to the padded image
 * (h + ph), as Caffe does; padded cells count as zeros. */
typedef struct cd_pool_desc {
    int mode;
    int n, c, h, w;
    int kh, kw, sh, sw, ph, pw;
    int oh, ow;
} cd_pool_desc;

enum cd_lrn_mode { CD_LRN_ACROSS = 0, CD_LRN_WITHIN = 1 };

/* Local response normalization as Caffe defines it.
 * ACROSS: scale = k + alpha/size * sum_{c' in window(c)} x^2; y = x * scale^-beta.
 * WITHIN: scale = 1 + alpha * avgpool_{size x size, pad (size-1)/2}(x^2) (divided by
 *         size*size, Caffe's AVE rules); y = x * scale^-beta. k is ignored (Caffe). */
typedef struct cd_lrn_desc {
    int mode;
    int n, c, h, w;
    int size;
    float alpha, beta, k;
} cd_lrn_desc;

enum cd_act { CD_ACT_RELU = 0, CD_ACT_SIGMOID = 1, CD_ACT_TANH = 2 };

/* Solver types and one fused update per parameter tensor (see cd_be_update). */
enum cd_solver_type {
    CD_SOLVER_SGD = 0,
    CD_SOLVER_NESTEROV,
    CD_SOLVER_ADAGRAD,
    CD_SOLVER_RMSPROP,
    CD_SOLVER_ADADELTA,
    CD_SOLVER_ADAM,
    CD_SOLVER_COUNT
};

enum cd_reg_type { CD_REG_L2 = 0, CD_REG_L1 = 1 };

/*
 * One solver step for one parameter tensor, exactly Caffe's sequence:
 *   g *= grad_scale                       (Normalize: 1/iter_size)
 *   g += decay * w   (L2)  or  decay * sign(w)  (L1)     (Regularize; decay already
 *                                                          includes decay_mult)
 *   update = f(g, history) with rate lr (lr already includes lr_mult)
 *   w -= update
 * f per type (h1, h2 are history tensors of n floats, zero at the start):
 *   SGD:      h1 = momentum*h1 + lr*g;                          w -= h1
 *   NESTEROV: hp = h1; h1 = momentum*h1 + lr*g;                 w -= (1+momentum)*h1 - momentum*hp
 *   ADAGRAD:  h1 += g*g;                                        w -= lr*g / (sqrt(h1) + delta)
 *   RMSPROP:  h1 = rms_decay*h1 + (1-rms_decay)*g*g;            w -= lr*g / (sqrt(h1) + delta)
 *   ADADELTA: h1 = momentum*h1 + (1-momentum)*g*g;
 *             u = g * sqrt(h2 + delta) / sqrt(h1 + delta);
 *             h2 = momentum*h2 + (1-momentum)*u*u;              w -= lr*u
 *   ADAM:     h1 = beta1*h1 + (1-beta1)*g;  h2 = beta2*h2 + (1-beta2)*g*g   (beta1 =
 *             momentum, beta2 = momentum2); corr = sqrt(1-beta2^t)/(1-beta1^t) with
 *             t = iteration+1;                                  w -= lr*corr*h1/(sqrt(h2)+delta)
 * After the call g holds the regularized, scaled gradient, or zero where zero_grad is set:
 * the solver's step then leaves the gradient ready for the next accumulation in the same
 * pass, instead of a second pass over every gradient to zero it.
 */
typedef struct cd_update_desc {
    int type;       /* enum cd_solver_type */
    int reg;        /* enum cd_reg_type */
    float lr;
    float momentum;
    float momentum2;
    float rms_decay;
    float delta;
    float decay;
    float grad_scale;
    long iteration; /* 0-based solver iteration, for ADAM's bias correction */
    int zero_grad;  /* 1: g is left zero after the step (see above) */
} cd_update_desc;

/* What a backend is, for the choices the engine makes (cd_backend_iface.caps). What it
 * can do beyond the required slots is told by its optional slots (cd_be_supports). */
enum cd_backend_cap {
    /* its memory is a device's own, not the host's, and the libraries' workspaces that
     * grow while training come out of it too (the batch search leaves them room); it
     * has a device ordinal and is tuned as an accelerator, not as CPU cores */
    CD_BE_CAP_DEVICE = 1u << 0,
    /* conv and gemm honour be->precision (tf32, fp16, bf16); without it they compute in
     * fp32 whatever it says, so an fp16 loss needs no scaling there */
    CD_BE_CAP_REDUCED_PRECISION = 1u << 1,
};

/* Called with the message before a failed device call ends the process, so the engine
 * can say which layer ran it (see set_fail_hook). */
typedef void (*cd_backend_fail_hook)(cd_backend_t *be, const char *message);

/* The largest data-parallel group id with its terminator (group_id). */
#define CD_BE_GROUP_ID_LEN 512

/* The function table. Slots marked optional may be NULL. */
typedef struct cd_backend_iface {
    const char *name; /* "cpu", "cuda": for messages, never for decisions */
    unsigned caps;    /* enum cd_backend_cap bits */

    /* memory */
    void *(*alloc)(cd_backend_t *be, size_t bytes);          /* zeroed; NULL on failure */
    void (*free)(cd_backend_t *be, void *ptr);
    void (*upload)(cd_backend_t *be, void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(cd_backend_t *be, void *dst_host, const void *src_dev, size_t bytes);
    void (*copy)(cd_backend_t *be, void *dst_dev, const void *src_dev, size_t bytes);
    void (*sync)(cd_backend_t *be);                          /* wait for queued work */

    /* elementwise on n floats */
    void (*set)(cd_backend_t *be, size_t n, float v, float *y);                         /* y = v */
    void (*scale)(cd_backend_t *be, size_t n, float a, const float *x, float *y);       /* y = a*x */
    void (*axpy)(cd_backend_t *be, size_t n, float a, const float *x, float *y);        /* y += a*x */
    void (*axpby)(cd_backend_t *be, size_t n, float a, const float *x, float b, float *y); /* y = a*x + b*y */
    void (*mul)(cd_backend_t *be, size_t n, const float *a, const float *b, float *y);  /* y = a*b */
    void (*mul_add)(cd_backend_t *be, size_t n, const float *a, const float *b, float *y); /* y += a*b */
    /* Eltwise MAX over k inputs, called once per input idx = 0..k-1: idx 0 sets y = x and
     * mask = 0; later inputs replace y (and set mask = idx) where x > y strictly. */
    void (*max_index)(cd_backend_t *be, size_t n, const float *x, float *y, int idx, float *mask);
    /* dx = (mask == idx) ? dy : 0 */
    void (*mask_select)(cd_backend_t *be, size_t n, const float *dy, const float *mask, int idx, float *dx);
    float (*dot)(cd_backend_t *be, size_t n, const float *a, const float *b);           /* returns sum a*b */
    float (*asum)(cd_backend_t *be, size_t n, const float *x);                          /* sum |x| */

    /* y = (shift + scale*x)^power ; backward: dx = dy * power*scale*(shift+scale*x)^(power-1) */
    void (*power_forward)(cd_backend_t *be, size_t n, float power, float scale, float shift,
                          const float *x, float *y);
    void (*power_backward)(cd_backend_t *be, size_t n, float power, float scale, float shift,
                           const float *x, const float *dy, float *dx);

    /* Per-channel affine on (outer, channels, inner) viewed data:
     * y[o,c,i] = x[o,c,i]*gamma[c] + (beta ? beta[c] : 0); gamma may be NULL (then 1). */
    void (*channel_affine)(cd_backend_t *be, int outer, int channels, int inner,
                           const float *x, const float *gamma, const float *beta, float *y);
    /* sums over outer and inner: dgamma[c] += sum dy*x ; dbeta[c] += sum dy (either may be
     * NULL; x is not read, and may be NULL, when dgamma is NULL) */
    void (*channel_affine_grad)(cd_backend_t *be, int outer, int channels, int inner,
                                const float *x, const float *dy, float *dgamma, float *dbeta);

    /* C = alpha * op(A) * op(B) + beta * C; row-major; op(A) is MxK, op(B) KxN, C MxN. */
    void (*gemm)(cd_backend_t *be, int trans_a, int trans_b, int m, int n, int k,
                 float alpha, const float *a, const float *b, float beta, float *c);

    /* convolution; bias may be NULL. y, dx overwritten; dw, db accumulated. */
    void (*conv_forward)(cd_backend_t *be, const cd_conv_desc *d, const float *x,
                         const float *w, const float *bias, float *y);
    void (*conv_backward_data)(cd_backend_t *be, const cd_conv_desc *d, const float *w,
                               const float *dy, float *dx);
    void (*conv_backward_filter)(cd_backend_t *be, const cd_conv_desc *d, const float *x,
                                 const float *dy, float *dw, float *db);

    /* pooling. The backward gets x and y so a backend may find the max again; mask is
     * the backend's own record of the forward's choices (pool_mask_size floats, which the
     * caller allocates), or NULL: the caller passes it to a forward to fill and then to
     * the backward of that same x, or NULL to both. Results are the same either way. */
    void (*pool_forward)(cd_backend_t *be, const cd_pool_desc *d, const float *x, float *y,
                         float *mask);
    void (*pool_backward)(cd_backend_t *be, const cd_pool_desc *d, const float *x,
                          const float *y, const float *mask, const float *dy, float *dx);
    /* optional: how many floats of mask the backend would keep for d (0: it keeps none,
     * as for shapes where finding the max again is as fast) */
    size_t (*pool_mask_size)(cd_backend_t *be, const cd_pool_desc *d);

    void (*lrn_forward)(cd_backend_t *be, const cd_lrn_desc *d, const float *x, float *y);
    void (*lrn_backward)(cd_backend_t *be, const cd_lrn_desc *d, const float *x,
                         const float *y, const float *dy, float *dx);

    /* activations on n floats. relu uses slope for x <= 0 (Caffe's negative_slope).
     * backward reads x and y (either may be used; in-place callers pass x == y for
     * sigmoid/tanh, and for relu the backend must then decide on y > 0, which equals
     * x > 0 for slope >= 0). */
    void (*act_forward)(cd_backend_t *be, int act, float slope, size_t n, const float *x, float *y);
    void (*act_backward)(cd_backend_t *be, int act, float slope, size_t n, const float *x,
                         const float *y, const float *dy, float *dx);

    /* softmax over the channel axis of (outer, channels, inner) */
    void (*softmax_forward)(cd_backend_t *be, int outer, int channels, int inner,
                            const float *x, float *y);
    void (*softmax_backward)(cd_backend_t *be, int outer, int channels, int inner,
                             const float *y, const float *dy, float *dx);

    /* Cross entropy on softmax output prob (outer, channels, inner) and integer-valued
     * float labels (outer, inner). Labels equal to ignore_label (when has_ignore) are
     * skipped. loss_out[0] = -sum log(max(prob[label], FLT_MIN)), count_out[0] = number
     * of labels used; both device floats of one element. */
    void (*xent_forward)(cd_backend_t *be, int outer, int channels, int inner,
                         const float *prob, const float *label, int has_ignore, int ignore_label,
                         float *loss_out, float *count_out);
    /* dx = (prob - onehot(label)) * scale, zero at ignored positions. */
    void (*xent_backward)(cd_backend_t *be, int outer, int channels, int inner,
                          const float *prob, const float *label, int has_ignore, int ignore_label,
                          float scale, float *dx);

    /* Top-k accuracy on scores (outer, channels, inner): correct_out[0] = number of
     * positions whose label is among the k largest scores (Caffe's rule: the label is
     * correct when fewer than k other scores are greater than or equal to its score, so
     * ties count against it and constant scores are never correct),
     * count_out[0] = positions used. Device floats of one element. */
    void (*accuracy)(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                     const float *label, int top_k, int has_ignore, int ignore_label,
                     float *correct_out, float *count_out);

    /* Batch norm statistics and normalization over (outer, channels, inner):
     * mean[c], var[c] over outer*inner elements (biased variance);
     * y = (x - mean[c]) / sqrt(var[c] + eps). In backward, with xhat = y:
     * dx = (dy - mean(dy) - xhat * mean(dy*xhat)) / sqrt(var + eps) (means per channel)
     * when the statistics came from the batch; dx = dy / sqrt(var+eps) with global stats. */
    void (*bn_stats)(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                     float *mean, float *var);
    void (*bn_normalize)(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                         const float *mean, const float *var, float eps, float *y);
    void (*bn_backward)(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                        const float *var, float eps, int global_stats, const float *dy, float *dx);

    /* Dropout with a counter-based generator: element i of call `counter` is kept when
     * cd_rand_keyed(cd_rand_key(seed, counter), i) >= ratio; kept values are scaled by
     * 1/(1-ratio).
     * mask (n floats) receives the multiplier (0 or 1/(1-ratio)) for the backward. */
    void (*dropout_forward)(cd_backend_t *be, size_t n, float ratio, uint64_t seed,
                            uint64_t counter, const float *x, float *mask, float *y);

    /* Copy a block of a strided view: for o in [0,outer): copy `count` floats from
     * src + o*src_stride to dst + o*dst_stride. Concat and slicing use it. If
     * accumulate, dst += src instead. */
    void (*copy_strided)(cd_backend_t *be, int outer, size_t count, const float *src,
                         size_t src_stride, float *dst, size_t dst_stride, int accumulate);

    /* Fused solver update for one tensor of n floats; see cd_update_desc. */
    void (*update)(cd_backend_t *be, const cd_update_desc *d, size_t n, float *w, float *g,
                   float *h1, float *h2);

    /* Data preparation on the device (optional; NULL means the engine does it on the
     * host). src is a batch of uint8 images (n, c, sh, sw); dst (n, c, oh, ow) floats:
     * dst = (src[crop at (oy[i], ox[i]), flipped as mirror[i] says] - mean) * scale, with
     * mirror[i] a mask of enum cd_flip (or mirror NULL: no flips) and mean a (c, sh, sw)
     * float image or NULL. The mean is read at the source pixel. */
    void (*prepare_batch)(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow,
                          const uint8_t *src, const int *oy, const int *ox,
                          const uint8_t *mirror, const float *mean, float scale, float *dst);

    /*
     * optional: DIGITS's data augmentations on the device (cdigits/augment.h, whose
     * cd_aug_apply_u8 and cd_aug_apply_label are the reference). src and dst are n
     * images (n, c, h, w) uint8 that must not overlap; params is n cd_aug_params in this
     * backend's memory, one per image. kind CD_AUG_IMAGE: geometry bilinear with the
     * edges repeated, then contrast, HSV and noise; CD_AUG_LABEL: the same geometry
     * with nearest sampling and `fill` outside the source, nothing else. The loader
     * draws params (cd_aug_draw), the caller uploads them with the batch, and
     * prepare_batch then crops, flips and subtracts the mean from dst as from any batch.
     * c is at most CD_AUG_MAX_CHANNELS.
     */
    void (*augment_batch)(cd_backend_t *be, int n, int c, int h, int w, const struct cd_aug_params *params,
                          int kind, uint8_t fill, const uint8_t *src, uint8_t *dst);
    /* optional: whitening (aug_whitening) of n float images of `size` values each, in
     * place, after prepare_batch: x = (x - mean) / max(stddev, 1/sqrt(size)) per image
     * (cd_aug_whiten_f32) */
    void (*whiten_batch)(cd_backend_t *be, int n, size_t size, float *x);

    /* optional: average n floats across the ranks of a data-parallel group, in order
     * with the ops queued before (the identity outside a group) */
    int (*allreduce_mean)(cd_backend_t *be, float *x, size_t n);
    /* optional: the same average started on a communication stream once the ops queued
     * so far are done, so that it runs beside the ops queued after it; allreduce_wait
     * makes the ops queued after it wait for every average started. Without them the
     * engine calls allreduce_mean at the same points. */
    int (*allreduce_start)(cd_backend_t *be, float *x, size_t n);
    int (*allreduce_wait)(cd_backend_t *be);
    /* optional: rank 0's n floats copied to every rank of the group */
    int (*broadcast)(cd_backend_t *be, float *x, size_t n);

    /* optional: device memory free and total in bytes (CD_OK), for the batch-size
     * search and the performance advisor */
    int (*mem_info)(cd_backend_t *be, size_t *free_bytes, size_t *total_bytes);

    /* optional: page-locked host memory for the loader's batches (NULL: malloc), and
     * an upload that is queued on a copy stream and overlaps compute; upload_wait
     * makes the compute stream wait for the queued uploads. Without them the engine
     * uses upload. */
    void *(*host_alloc)(cd_backend_t *be, size_t bytes);
    void (*host_free)(cd_backend_t *be, void *ptr);
    void (*upload_async)(cd_backend_t *be, void *dst_dev, const void *src_host, size_t bytes);
    void (*upload_wait)(cd_backend_t *be);

    void (*destroy)(cd_backend_t *be);

    /*
     * optional: one captured step, replayed (CUDA graphs). graph_begin starts capturing
     * the ops called on this backend; they are recorded, not run. graph_end stops,
     * turns the record into the backend's one replayable step (replacing the one
     * before) and returns CD_OK, or CD_ERR with the reason in be->err (then no record
     * is kept, the one before included: run the step without one). graph_replay runs
     * the recorded step once more, queued like any op (CD_ERR when there is none).
     *
     * The record holds every argument as it was when captured: pointers, sizes and
     * scalars passed by value (a learning rate, a loss scale, an ADAM iteration)
     * replay unchanged, and the data behind the pointers is read anew. So a value
     * that changes from step to step must reach the ops through device memory, or the
     * step must be captured again when it changes. One exception: a dropout_forward
     * captured with counter c draws at replay k (0 for the first replay after
     * graph_end) with counter c + k, as a loop that advances its counter by one per
     * step would. Every buffer the record touches must stay allocated until the next
     * graph_end or destroy.
     *
     * Between graph_begin and graph_end the caller may not: read results on the host
     * (download, dot, asum), wait (sync), allocate or free device memory (alloc,
     * free), or copy from the host (upload, upload_async, upload_wait). An op that
     * breaks one of these rules does nothing (download leaves zeros, dot and asum
     * return 0, alloc NULL) and spoils the capture: graph_end then fails naming it. So
     * does any device error while capturing: it is recorded, not fatal, and graph_end
     * fails with the first one, so the caller can go on running the step eagerly.
     * Run the step once before
     * capturing it: a convolution first met while capturing cannot measure its
     * algorithms and takes the library's heuristic choice, and buffers that grow then
     * are kept until the record is replaced. Only one thread may use the backend
     * while it captures.
     */
    int (*graph_begin)(cd_backend_t *be);
    int (*graph_end)(cd_backend_t *be);
    int (*graph_replay)(cd_backend_t *be);

    /*
     * optional: data-parallel groups across devices, one rank per device (NCCL on
     * CUDA). group_id makes a new group's id on the rank that starts it: text of at
     * most CD_BE_GROUP_ID_LEN bytes with its terminator, which the caller hands to every
     * rank; each calls group_join with it, the group's size and its own rank. After the
     * join allreduce_mean, allreduce_start and broadcast act across the group. Both
     * return CD_OK, or CD_ERR with the reason in why. (Replicas that share one device's
     * memory, the CPU's, join an in-process group instead: join_local_group.)
     *
     * These are slots rather than functions looked up by name (ggml's
     * get_proc_address): the extras a backend may have are few and known, a typed slot
     * lets the compiler check both the backend's function and the engine's call, and
     * "NULL means not supported" stays the one rule that every optional feature
     * follows, answered by one wrapper each.
     */
    int (*group_id)(cd_backend_t *be, char *id, size_t id_len, char *why, size_t why_len);
    int (*group_join)(cd_backend_t *be, const char *id, int nranks, int rank, char *why,
                      size_t why_len);
    /* optional: the hook a fatal device failure calls before it ends the process (NULL
     * restores the default: print and abort). Process-wide where the backend's failure
     * handling is (CUDA): the last hook set wins. A backend whose failures are returned
     * to the caller, not fatal, has none. */
    void (*set_fail_hook)(cd_backend_t *be, cd_backend_fail_hook hook);
    /* optional: replicas that are threads of one process on host memory (the CPU's)
     * join the in-process group g as rank (group.h); allreduce_mean and broadcast then
     * act across it. CD_OK, or CD_ERR when rank is outside the group. */
    int (*join_local_group)(cd_backend_t *be, cd_group_t *g, int rank);
} cd_backend_iface;

/* Arithmetic of the gemm-shaped ops (conv, gemm) on backends with several: values
 * are stored in fp32 either way; fp16 and bf16 round the inputs of those ops and
 * accumulate in fp32 (master weights stay fp32; the engine scales the loss for fp16). */
/* what augment_batch samples: an image (bilinear, photometric steps) or labels (nearest) */
enum cd_aug_kind { CD_AUG_IMAGE = 0, CD_AUG_LABEL = 1 };
/* how prepare_batch flips an image: left-right (Caffe's mirror), upside down, or both */
enum cd_flip { CD_FLIP_LR = 1, CD_FLIP_UD = 2 };

enum cd_precision { CD_PREC_FP32 = 0, CD_PREC_TF32, CD_PREC_FP16, CD_PREC_BF16, CD_PREC_COUNT };

struct cd_backend {
    const cd_backend_iface *iface;
    int device;   /* device ordinal; 0 for the CPU */
    void *ctx;    /* backend-private state */
    char err[256];/* last error, for messages */
    int precision;/* enum cd_precision; the CPU backend always computes in fp32 */
};

/* Create the CPU backend (always available). threads <= 0 means all cores. */
cd_backend_t *cd_backend_cpu_new(int threads);
/* Caps what this CPU backend's alloc hands out at bytes (0: no cap, the default):
 * past it alloc returns NULL as a GPU out of memory does, so batch halving and
 * batch_size auto behave as on a device, and mem_info reports the cap. */
void cd_backend_cpu_limit_memory(cd_backend_t *be, size_t bytes);

/* Create the CUDA backend on `device`; NULL (and a reason in why) when CUDA is not
 * compiled in or no GPU is usable. */
cd_backend_t *cd_backend_cuda_new(int device, char *why, size_t why_len);
/* Number of usable CUDA devices; 0 when none or no driver (never fails). */
int cd_backend_cuda_device_count(void);
/* Compiled with CUDA support? */
int cd_backend_cuda_compiled(void);

void cd_backend_free(cd_backend_t *be);

/*
 * The optional slots, one wrapper each (src/engine/backend_iface.c): each checks its
 * slot and, where the backend lacks it, gives the fallback the slot's comment
 * documents, or CD_ERR with "the <name> backend does not support ..." in be->err (why,
 * for the group calls). Callers never test a slot themselves.
 */

/* What a backend can do beyond the required slots: a feature is there when every slot
 * it needs is (table in backend_iface.c). */
enum cd_be_feature {
    CD_BE_PREPARE_BATCH = 0,    /* prepare_batch: batches are prepared on the device */
    CD_BE_ASYNC_UPLOAD,         /* upload_async and upload_wait: uploads overlap compute */
    CD_BE_OVERLAPPED_ALLREDUCE, /* allreduce_start and allreduce_wait */
    CD_BE_GRAPHS,               /* graph_begin, graph_end and graph_replay */
    CD_BE_DEVICE_GROUPS,        /* group_id and group_join */
    CD_BE_LOCAL_GROUPS,         /* join_local_group */
    CD_BE_AUGMENT,              /* augment_batch and whiten_batch: augmentations on the device */
    CD_BE_FEATURE_COUNT
};
/* 1 when be has the feature, 0 when not (or the feature is unknown). */
int cd_be_supports(const cd_backend_t *be, int feature);
/* "device graphs" and the like, for messages; "?" for an unknown feature. */
const char *cd_be_feature_name(int feature);

/* prepare_batch; CD_ERR without it (the caller prepares on the host: input_prep.h). */
int cd_be_prepare_batch(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow,
                        const uint8_t *src, const int *oy, const int *ox,
                        const uint8_t *mirror, const float *mean, float scale, float *dst);
/* augment_batch; CD_ERR without it (the caller augments each image on the host with
 * cd_aug_apply_u8 / cd_aug_apply_label before the upload) or with c outside
 * 1..CD_AUG_MAX_CHANNELS or a kind that is none of enum cd_aug_kind. */
int cd_be_augment_batch(cd_backend_t *be, int n, int c, int h, int w, const struct cd_aug_params *params,
                        int kind, uint8_t fill, const uint8_t *src, uint8_t *dst);
/* whiten_batch; CD_ERR without it (the caller whitens on the host: cd_aug_whiten_f32). */
int cd_be_whiten_batch(cd_backend_t *be, int n, size_t size, float *x);
/* allreduce_mean and broadcast; without them the backend is in no group: the
 * identity, CD_OK. */
int cd_be_allreduce_mean(cd_backend_t *be, float *x, size_t n);
int cd_be_broadcast(cd_backend_t *be, float *x, size_t n);
/* allreduce_start and allreduce_wait; without the pair, start is cd_be_allreduce_mean
 * at once and wait has nothing to wait for (CD_OK). */
int cd_be_allreduce_start(cd_backend_t *be, float *x, size_t n);
int cd_be_allreduce_wait(cd_backend_t *be);
/* pool_mask_size; 0 without it (the backward finds the max again). */
size_t cd_be_pool_mask_size(cd_backend_t *be, const cd_pool_desc *d);
/* mem_info; CD_ERR (and zeros) when the backend cannot tell. */
int cd_be_mem_info(cd_backend_t *be, size_t *free_bytes, size_t *total_bytes);
/* host_alloc and host_free; NULL without the pair (the caller uses malloc), and
 * host_free is then never given anything but NULL. */
void *cd_be_host_alloc(cd_backend_t *be, size_t bytes);
void cd_be_host_free(cd_backend_t *be, void *ptr);
/* upload_async and upload_wait; without the pair, upload (done at once) and nothing
 * to wait for. */
void cd_be_upload_async(cd_backend_t *be, void *dst_dev, const void *src_host, size_t bytes);
void cd_be_upload_wait(cd_backend_t *be);
/* graph_begin, graph_end and graph_replay; CD_ERR without all three (begin refuses to
 * start a capture that could not end). */
int cd_be_graph_begin(cd_backend_t *be);
int cd_be_graph_end(cd_backend_t *be);
int cd_be_graph_replay(cd_backend_t *be);
/* group_id and group_join; CD_ERR with the reason in why without them. */
int cd_be_group_id(cd_backend_t *be, char *id, size_t id_len, char *why, size_t why_len);
int cd_be_group_join(cd_backend_t *be, const char *id, int nranks, int rank, char *why,
                     size_t why_len);
/* join_local_group; CD_ERR with the reason in be->err without it. */
int cd_be_join_local_group(cd_backend_t *be, cd_group_t *g, int rank);
/* set_fail_hook; nothing to do without it (the backend's failures are not fatal). */
void cd_be_set_fail_hook(cd_backend_t *be, cd_backend_fail_hook hook);

#ifdef __cplusplus
}
#endif
#endif
