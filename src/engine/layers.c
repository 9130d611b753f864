/* The layer table: every layer type the engine knows, gathered from the per-topic
 * tables so that a lookup is one loop and the error for an unknown type can list
 * them all. */
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"

static const cd_layer_type *const tables[] = {
    cd_layers_data, cd_layers_conv, cd_layers_act, cd_layers_norm, cd_layers_shape, cd_layers_loss,
    cd_layers_spatial,
    cd_layers_regress,
    cd_layers_detect, cd_layers_detect_cluster,
};

const cd_layer_type *cd_layer_type_find(const char *name)
{
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const cd_layer_type *lt = tables[t]; lt->name; lt++)
            if (!strcmp(lt->name, name))
                return lt;
    return NULL;
}

const char *cd_layer_type_names(void)
{
    static char buf[1024];
    if (buf[0])
        return buf;
    size_t off = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const cd_layer_type *lt = tables[t]; lt->name; lt++) {
            if (!strcmp(lt->name, "Split"))
                continue; /* inserted by the engine, not written by people */
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", off ? ", " : "", lt->name);
            if (off >= sizeof buf)
                break;
        }
    return buf;
}
