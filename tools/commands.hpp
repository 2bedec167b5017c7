#pragma once
/// \file
/// Subcommands of the `muflow` CLI. Each registers its options on a CLI11 app and returns the
/// function that runs it (exit code). All of them use the public Server API.

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace muflow::tools {

using Command = std::function<int()>;

/// Prints "muflow COMMAND: WHAT" on stderr and returns 1, a failed command's exit code.
int command_failed(const char* command, const std::string& what);

/// `muflow run [TOPOLOGY] [--outputs FILE.jsonl] [--trace FILE.json] [--quiet]`
Command add_run_command(CLI::App& app);
/// `muflow serve [TOPOLOGY] [--host H] [--port P] [--api-key K] ...` (OpenAI-compatible HTTP)
Command add_serve_command(CLI::App& app);
/// `muflow generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) ...`
Command add_generate_command(CLI::App& app);
/// `muflow bench TOPOLOGY [--wirings a,b] [--sweep KEY=v1,v2]... [--csv FILE] [--json]`, or
/// `muflow bench TOPOLOGY --url URL [--max-concurrency N] ...` against an HTTP server
Command add_bench_command(CLI::App& app);
/// `muflow plan TOPOLOGY [--traffic CSV] [--routing CSV] [--colocate TOPOLOGY] ...`
Command add_plan_command(CLI::App& app);
/// `muflow calibrate [TOPOLOGY] --backend cpu -o FILE.csv` (measured kernels for the sim)
Command add_calibrate_command(CLI::App& app);
/// `muflow make-model --out DIR --type mixtral|qwen2_moe ...`
Command add_make_model_command(CLI::App& app);
/// `muflow worker --listen HOST:PORT [--token-file FILE] [--allow-remote]` (cluster process)
Command add_worker_command(CLI::App& app);
/// `muflow trace summary TRACE.json [--top N] [--json]`
Command add_trace_summary_command(CLI::App& app);
/// `muflow trace view TRACE.json -o REPORT.html [--compare OTHER.json] [--title T]`
Command add_trace_view_command(CLI::App& app);

}  // namespace muflow::tools
