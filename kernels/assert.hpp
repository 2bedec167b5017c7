#pragma once
/// \file
/// The project's one assert macro for broken internal invariants (never for bad input:
/// bad input returns absl::Status). Lives in kernels/, the lowest layer, so every folder may
/// include it. Active in every build type.

#include <cstdio>
#include <cstdlib>

#define MUFLOW_ASSERT(cond, msg)                                                      \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "muflow: internal invariant violated at %s:%d: %s (%s)\n", \
                   __FILE__, __LINE__, #cond, msg);                                   \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)
