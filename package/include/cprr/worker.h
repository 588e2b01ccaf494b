#pragma once
// A case library's main (<cprr/worker.h>), one line:
//   int main(int argc, char** argv) { return cprr::worker_main(argc, argv); }
#include "recorder/rank/worker.h"
