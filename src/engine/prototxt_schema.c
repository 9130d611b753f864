/*
 * Schema tables for Caffe's NetParameter and SolverParameter, following caffe.proto:
 * field names, scalar types (int32 -> INT, uint32 -> UINT, int64 -> INT64, float ->
 * FLOAT) and enum value names. Fields that cdigits does not act on (data_param's
 * source, solver snapshot_format, ...) are listed anyway so that standard Caffe and
 * DIGITS files validate; the code that builds networks decides what it uses.
 *
 * Messages are declared leaves first because each table points at the tables of its
 * message-typed fields.
 */
#include "cdigits/prototxt.h"

#include <stddef.h>

#define F(n, t) {n, CD_PT_T_##t, 0, NULL, NULL}      /* optional scalar */
#define R(n, t) {n, CD_PT_T_##t, 1, NULL, NULL}      /* repeated scalar */
#define E(n, e) {n, CD_PT_T_ENUM, 0, e, NULL}        /* optional enum */
#define M(n, m) {n, CD_PT_T_MSG, 0, NULL, &m}        /* optional message */
#define RM(n, m) {n, CD_PT_T_MSG, 1, NULL, &m}       /* repeated message */
#define END {NULL, 0, 0, NULL, NULL}
#define MESSAGE(var, pname, ...)                                                      \
    static const cd_pt_field var##_fields[] = {__VA_ARGS__, END};                     \
    static const cd_pt_message var = {pname, var##_fields}

/* ---- enums ---------------------------------------------------------------------- */

static const char *const phase_enum[] = {"TRAIN", "TEST", NULL};
static const char *const dim_check_mode_enum[] = {"STRICT", "PERMISSIVE", NULL};
static const char *const engine_enum[] = {"DEFAULT", "CAFFE", "CUDNN", NULL};
static const char *const variance_norm_enum[] = {"FAN_IN", "FAN_OUT", "AVERAGE", NULL};
static const char *const normalization_enum[] = {"FULL", "VALID", "BATCH_SIZE", "NONE", NULL};
static const char *const db_enum[] = {"LEVELDB", "LMDB", NULL};
static const char *const eltwise_op_enum[] = {"PROD", "SUM", "MAX", NULL};
static const char *const norm_region_enum[] = {"ACROSS_CHANNELS", "WITHIN_CHANNEL", NULL};
static const char *const pool_method_enum[] = {"MAX", "AVE", "STOCHASTIC", NULL};
static const char *const round_mode_enum[] = {"CEIL", "FLOOR", NULL};
static const char *const solver_type_enum[] = {"SGD", "NESTEROV", "ADAGRAD", "RMSPROP",
                                               "ADADELTA", "ADAM", NULL};
static const char *const solver_mode_enum[] = {"CPU", "GPU", NULL};
static const char *const snapshot_format_enum[] = {"HDF5", "BINARYPROTO", NULL};
static const char *const gridbox_type_enum[] = {"GRIDBOX_MAX", "GRIDBOX_MIN", NULL};
static const char *const coverage_type_enum[] = {"RECTANGULAR", NULL};

/* ---- shared messages ------------------------------------------------------------- */

MESSAGE(filler_msg, "FillerParameter",
        F("type", STRING), F("value", FLOAT), F("min", FLOAT), F("max", FLOAT),
        F("mean", FLOAT), F("std", FLOAT), F("sparse", INT),
        E("variance_norm", variance_norm_enum));

MESSAGE(blob_shape_msg, "BlobShape", R("dim", INT64));

MESSAGE(net_state_msg, "NetState",
        E("phase", phase_enum), F("level", INT), R("stage", STRING));

MESSAGE(net_state_rule_msg, "NetStateRule",
        E("phase", phase_enum), F("min_level", INT), F("max_level", INT),
        R("stage", STRING), R("not_stage", STRING));

MESSAGE(param_spec_msg, "ParamSpec",
        F("name", STRING), E("share_mode", dim_check_mode_enum),
        F("lr_mult", FLOAT), F("decay_mult", FLOAT));

MESSAGE(transform_msg, "TransformationParameter",
        F("scale", FLOAT), F("mirror", BOOL), F("crop_size", UINT), F("mean_file", STRING),
        R("mean_value", FLOAT), F("force_color", BOOL), F("force_gray", BOOL));

MESSAGE(loss_msg, "LossParameter",
        F("ignore_label", INT), E("normalization", normalization_enum), F("normalize", BOOL));

/* ---- per-layer parameters ----------------------------------------------------------- */

MESSAGE(accuracy_msg, "AccuracyParameter",
        F("top_k", UINT), F("axis", INT), F("ignore_label", INT));

MESSAGE(batch_norm_msg, "BatchNormParameter",
        F("use_global_stats", BOOL), F("moving_average_fraction", FLOAT), F("eps", FLOAT));

MESSAGE(bias_msg, "BiasParameter",
        F("axis", INT), F("num_axes", INT), M("filler", filler_msg));

MESSAGE(concat_msg, "ConcatParameter", F("axis", INT), F("concat_dim", UINT));

MESSAGE(convolution_msg, "ConvolutionParameter",
        F("num_output", UINT), F("bias_term", BOOL),
        R("pad", UINT), R("kernel_size", UINT), R("stride", UINT), R("dilation", UINT),
        F("pad_h", UINT), F("pad_w", UINT), F("kernel_h", UINT), F("kernel_w", UINT),
        F("stride_h", UINT), F("stride_w", UINT), F("group", UINT),
        M("weight_filler", filler_msg), M("bias_filler", filler_msg),
        E("engine", engine_enum), F("axis", INT), F("force_nd_im2col", BOOL));

MESSAGE(crop_msg, "CropParameter", F("axis", INT), R("offset", UINT));

MESSAGE(data_msg, "DataParameter",
        F("source", STRING), F("batch_size", UINT), F("rand_skip", UINT),
        E("backend", db_enum), F("scale", FLOAT), F("mean_file", STRING),
        F("crop_size", UINT), F("mirror", BOOL), F("force_encoded_color", BOOL),
        F("prefetch", UINT));

MESSAGE(class_mapping_msg, "ClassMapping", F("src", UINT), F("dst", UINT));

/* NV-Caffe's DetectNet messages (image_size_x/y of 0.15, crop_size_x/y their older names) */
MESSAGE(detectnet_groundtruth_msg, "DetectNetGroundTruthParameter",
        F("stride", UINT), F("scale_cvg", FLOAT), E("gridbox_type", gridbox_type_enum),
        F("max_cvg_len", UINT), F("min_cvg_len", UINT), E("coverage_type", coverage_type_enum),
        F("image_size_x", UINT), F("image_size_y", UINT), F("crop_size_x", UINT), F("crop_size_y", UINT),
        F("obj_norm", BOOL), F("crop_bboxes", BOOL), RM("object_class", class_mapping_msg));

MESSAGE(detectnet_augmentation_msg, "DetectNetAugmentationParameter",
        F("crop_prob", FLOAT), F("shift_x", UINT), F("shift_y", UINT), F("scale_prob", FLOAT),
        F("scale_min", FLOAT), F("scale_max", FLOAT), F("flip_prob", FLOAT), F("rotation_prob", FLOAT),
        F("max_rotate_degree", FLOAT), F("hue_rotation_prob", FLOAT), F("hue_rotation", FLOAT),
        F("desaturation_prob", FLOAT), F("desaturation_max", FLOAT));

MESSAGE(dropout_msg, "DropoutParameter", F("dropout_ratio", FLOAT));

MESSAGE(eltwise_msg, "EltwiseParameter",
        E("operation", eltwise_op_enum), R("coeff", FLOAT), F("stable_prod_grad", BOOL));

MESSAGE(flatten_msg, "FlattenParameter", F("axis", INT), F("end_axis", INT));

MESSAGE(inner_product_msg, "InnerProductParameter",
        F("num_output", UINT), F("bias_term", BOOL),
        M("weight_filler", filler_msg), M("bias_filler", filler_msg),
        F("axis", INT), F("transpose", BOOL));

MESSAGE(input_msg, "InputParameter", RM("shape", blob_shape_msg));

MESSAGE(lrn_msg, "LRNParameter",
        F("local_size", UINT), F("alpha", FLOAT), F("beta", FLOAT),
        E("norm_region", norm_region_enum), F("k", FLOAT), E("engine", engine_enum));

MESSAGE(pooling_msg, "PoolingParameter",
        E("pool", pool_method_enum),
        F("pad", UINT), F("pad_h", UINT), F("pad_w", UINT),
        F("kernel_size", UINT), F("kernel_h", UINT), F("kernel_w", UINT),
        F("stride", UINT), F("stride_h", UINT), F("stride_w", UINT),
        E("engine", engine_enum), F("global_pooling", BOOL), E("round_mode", round_mode_enum));

MESSAGE(power_msg, "PowerParameter", F("power", FLOAT), F("scale", FLOAT), F("shift", FLOAT));

MESSAGE(python_msg, "PythonParameter",
        F("module", STRING), F("layer", STRING), F("param_str", STRING), F("share_in_parallel", BOOL));

MESSAGE(relu_msg, "ReLUParameter", F("negative_slope", FLOAT), E("engine", engine_enum));

MESSAGE(scale_msg, "ScaleParameter",
        F("axis", INT), F("num_axes", INT), M("filler", filler_msg),
        F("bias_term", BOOL), M("bias_filler", filler_msg));

MESSAGE(sigmoid_msg, "SigmoidParameter", E("engine", engine_enum));

MESSAGE(slice_msg, "SliceParameter",
        F("axis", INT), R("slice_point", UINT), F("slice_dim", UINT));

MESSAGE(contrastive_loss_msg, "ContrastiveLossParameter",
        F("margin", FLOAT), F("legacy_version", BOOL));

MESSAGE(softmax_msg, "SoftmaxParameter", F("axis", INT), E("engine", engine_enum));

MESSAGE(tanh_msg, "TanHParameter", E("engine", engine_enum));

/* ---- layers and the net -------------------------------------------------------------- */

MESSAGE(layer_msg, "LayerParameter",
        F("name", STRING), F("type", STRING), R("bottom", STRING), R("top", STRING),
        E("phase", phase_enum), R("loss_weight", FLOAT), RM("param", param_spec_msg),
        R("propagate_down", BOOL), RM("include", net_state_rule_msg), RM("exclude", net_state_rule_msg),
        M("transform_param", transform_msg), M("loss_param", loss_msg),
        M("accuracy_param", accuracy_msg), M("batch_norm_param", batch_norm_msg),
        M("bias_param", bias_msg), M("concat_param", concat_msg),
        M("convolution_param", convolution_msg), M("crop_param", crop_msg), M("data_param", data_msg),
        M("dropout_param", dropout_msg), M("eltwise_param", eltwise_msg),
        M("flatten_param", flatten_msg), M("inner_product_param", inner_product_msg),
        M("input_param", input_msg), M("lrn_param", lrn_msg), M("pooling_param", pooling_msg),
        M("power_param", power_msg), M("relu_param", relu_msg), M("scale_param", scale_msg),
        M("slice_param", slice_msg), M("contrastive_loss_param", contrastive_loss_msg),
        M("sigmoid_param", sigmoid_msg), M("softmax_param", softmax_msg), M("tanh_param", tanh_msg),
        M("python_param", python_msg), M("detectnet_groundtruth_param", detectnet_groundtruth_msg),
        M("detectnet_augmentation_param", detectnet_augmentation_msg));

static const cd_pt_field net_fields[] = {
    F("name", STRING), R("input", STRING), RM("input_shape", blob_shape_msg),
    R("input_dim", INT), F("force_backward", BOOL), M("state", net_state_msg),
    F("debug_info", BOOL), RM("layer", layer_msg), END};

const cd_pt_message cd_pt_net_parameter = {"NetParameter", net_fields};

/* ---- the solver -------------------------------------------------------------------------- */

static const cd_pt_field solver_fields[] = {
    F("net", STRING), M("net_param", cd_pt_net_parameter),
    F("train_net", STRING), R("test_net", STRING),
    M("train_net_param", cd_pt_net_parameter), RM("test_net_param", cd_pt_net_parameter),
    M("train_state", net_state_msg), RM("test_state", net_state_msg),
    R("test_iter", INT), F("test_interval", INT), F("test_compute_loss", BOOL),
    F("test_initialization", BOOL),
    F("base_lr", FLOAT), F("display", INT), F("average_loss", INT), F("max_iter", INT),
    F("iter_size", INT), F("lr_policy", STRING), F("gamma", FLOAT), F("power", FLOAT),
    F("momentum", FLOAT), F("weight_decay", FLOAT), F("regularization_type", STRING),
    F("stepsize", INT), R("stepvalue", INT), F("clip_gradients", FLOAT),
    F("snapshot", INT), F("snapshot_prefix", STRING), F("snapshot_diff", BOOL),
    E("snapshot_format", snapshot_format_enum), F("snapshot_after_train", BOOL),
    E("solver_mode", solver_mode_enum), F("device_id", INT), F("random_seed", INT64),
    F("type", STRING), F("delta", FLOAT), F("momentum2", FLOAT), F("rms_decay", FLOAT),
    F("debug_info", BOOL), E("solver_type", solver_type_enum), R("weights", STRING), END};

const cd_pt_message cd_pt_solver_parameter = {"SolverParameter", solver_fields};
