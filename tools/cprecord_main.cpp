#include "commands/record_command.h"

int main(int argc, char** argv) { return cprr::record_main(argc, argv); }
