// The worker: one line. cprecord --worker <this binary> runs the cases linked into it.
#include <cprr/worker.h>

int main(int argc, char** argv) { return cprr::worker_main(argc, argv); }
