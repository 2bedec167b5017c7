#pragma once
/// \file
/// Symbol visibility and version of the public muflow API (libmuflow.so).
///
/// libmuflow.so is built with hidden visibility: only what carries MUFLOW_API (the
/// muflow::Engine class and muflow::version) is exported. Everything else in include/muflow/
/// is header-only (inline functions and plain structs) and needs no export.

#if defined(__GNUC__) || defined(__clang__)
#define MUFLOW_API __attribute__((visibility("default")))
#else
#define MUFLOW_API
#endif

/// Version of these headers (semantic versioning; while the major version is 0, a minor
/// version may change the API). Compare with muflow::version(), the library's.
#define MUFLOW_VERSION_MAJOR 0
#define MUFLOW_VERSION_MINOR 1
#define MUFLOW_VERSION_PATCH 1
