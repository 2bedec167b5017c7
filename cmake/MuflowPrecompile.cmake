# muflow_precompile_headers(TARGET HEADER...): precompiles the third-party and standard
# headers most of TARGET's sources include (target_precompile_headers, PRIVATE). Parsing them
# was a third of a translation unit's compile time (CAF, nlohmann/json, CLI11, cpp-httplib,
# Abseil: 1–2.5 s each), and the build is most of CI on 2 cores (bench/README.md has the
# clean-build times). Only headers that change with the system's packages, never the
# project's own (an edit to one would rebuild every source of the target).
#
# Sources still include what they use: configure with -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON to
# check that they compile without it. A source with its own compile definitions or options
# (a precompiled header must be built with the flags it is used with) sets the source property
# SKIP_PRECOMPILE_HEADERS. CXX only: a target that gains CUDA sources needs a CUDA-free list.
function(muflow_precompile_headers target)
  target_precompile_headers(${target} PRIVATE ${ARGN})
endfunction()
