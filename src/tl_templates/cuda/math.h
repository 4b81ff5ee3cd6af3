// Copyright the TileLang compiler authors.
//
// Upstream TileLang's device headers live under tl_templates/cuda/; kernels and compile flags
// written for it (`-include tl_templates/cuda/math.h`, an #include in T.import_source code)
// find this one, which is the whole device library (tl.h).
#pragma once
#include "../../tl.h"
