/* The fused solver update (kernels/update.cu): one kernel per parameter tensor. */
#include <math.h>

#include "cuda_internal.h"

void cuda_update(cd_backend_t *be, const cd_update_desc *d, size_t n, float *w, float *g,
                 float *h1, float *h2)
{
    cuda_use_device(be);
    float adam_rate = d->lr;
    if (d->type == CD_SOLVER_ADAM) {
        double t = (double)d->iteration + 1.0;
        double corr = sqrt(1.0 - pow(d->momentum2, t)) / (1.0 - pow(d->momentum, t));
        adam_rate = (float)(d->lr * corr);
    }
    CD_LAUNCH(be, cdk_update(cuda_ctx_of(be)->stream, *d, adam_rate, n, w, g, h1, h2));
}
