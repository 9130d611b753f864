/* The solver: DIGITS's defaults per solver type, and one fused backend update per
 * learnable parameter tensor (see cd_update_desc in backend.h for the formulas). */
#include <string.h>

#include "cdigits/train.h"
#include "cdigits/util.h"

static const char *const solver_names[CD_SOLVER_COUNT] = {
    [CD_SOLVER_SGD] = "SGD",         [CD_SOLVER_NESTEROV] = "NESTEROV",
    [CD_SOLVER_ADAGRAD] = "ADAGRAD", [CD_SOLVER_RMSPROP] = "RMSPROP",
    [CD_SOLVER_ADADELTA] = "ADADELTA", [CD_SOLVER_ADAM] = "ADAM",
};

int cd_solver_type_parse(const char *name)
{
    for (int i = 0; i < CD_SOLVER_COUNT; i++)
        if (!strcasecmp(name, solver_names[i]))
            return i;
    return -1;
}

const char *cd_solver_type_name(int type)
{
    return type >= 0 && type < CD_SOLVER_COUNT ? solver_names[type] : "?";
}

const char *cd_solver_type_list(void) { return "SGD, NESTEROV, ADAGRAD, RMSPROP, ADADELTA, ADAM"; }

void cd_solver_opts_defaults(cd_solver_opts *o, int type, double base_lr)
{
    o->type = type;
    /* DIGITS: momentum 0.9 except for the types that don't use it */
    o->momentum = (type == CD_SOLVER_ADAGRAD || type == CD_SOLVER_RMSPROP) ? 0.0 : 0.9;
    o->momentum2 = 0.999;
    o->weight_decay = base_lr / 100.0;
    o->delta = 1e-8;
    o->rms_decay = 0.99;
    o->reg = CD_REG_L2;
    o->iter_size = 1;
    o->loss_scale = 1.0;
    o->lr.base_lr = base_lr;
}

double cd_solver_step(cd_net *net, const cd_solver_opts *o, long iter)
{
    double rate = cd_lr_at(&o->lr, iter);
    cd_update_desc d = {
        .type = o->type,
        .reg = o->reg,
        .momentum = (float)o->momentum,
        .momentum2 = (float)o->momentum2,
        .rms_decay = (float)o->rms_decay,
        .delta = (float)o->delta,
        .grad_scale = (float)(1.0 / ((o->iter_size > 0 ? o->iter_size : 1) *
                                     (o->loss_scale > 0 ? o->loss_scale : 1.0))),
        .iteration = iter,
        .zero_grad = 1,
    };
    /* each update leaves its gradient zero for the next accumulation; the gradients of
     * the parameters that are not updated are zeroed on their own */
    for (int i = 0; i < net->nparams; i++) {
        cd_param *p = net->params[i];
        if (!p->learnable || p->lr_mult == 0) {
            net->be->iface->set(net->be, p->count, 0.0f, p->diff);
            continue;
        }
        d.lr = (float)(rate * p->lr_mult);
        d.decay = (float)(o->weight_decay * p->decay_mult);
        net->be->iface->update(net->be, &d, p->count, p->data, p->diff, p->h1, p->h2);
    }
    return rate;
}
