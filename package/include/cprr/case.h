#pragma once
// The Case API, as an installed package's users include it (<cprr/case.h>): CPRR_CASE, Context,
// Buffer, Stream, Event. The header itself lives in its room, recorder/api/.
#include "recorder/api/case.h"
