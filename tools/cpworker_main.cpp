#include "recorder/rank/worker.h"

int main(int argc, char** argv) { return cprr::worker_main(argc, argv); }
