#include "commands/replay_command.h"

int main(int argc, char** argv) { return cprr::replay_main(argc, argv); }
