/* The worker's subcommands: each is int cmd_NAME(int argc, char **argv) with argv[0]
 * the subcommand name; returns the process exit status (see docs/worker-protocol.md). */
#ifndef CDIGITS_CLI_COMMANDS_H
#define CDIGITS_CLI_COMMANDS_H

int cd_cmd_check_net(int argc, char **argv);
int cd_cmd_dataset(int argc, char **argv);
int cd_cmd_import_idx(int argc, char **argv);
int cd_cmd_import_onnx(int argc, char **argv);
int cd_cmd_train(int argc, char **argv);
int cd_cmd_classify(int argc, char **argv);
int cd_cmd_serve_model(int argc, char **argv);
int cd_cmd_export_onnx(int argc, char **argv);
int cd_cmd_train_keys(int argc, char **argv);

#endif
