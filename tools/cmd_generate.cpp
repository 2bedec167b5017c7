// `muflow generate`: continues one prompt with an HF model folder, through the same Server API
// (and actor wiring) a host application uses.
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "actors/server.hpp"
#include "engine/model/npy.hpp"
#include "nlohmann/json.hpp"
#include "tools/commands.hpp"

namespace muflow::tools {
namespace {

// A CLI11 check for a finite number with `ok(v)`; NaN and inf are refused (CLI::Range lets
// NaN through) and the message says the interval as written, e.g. "(0, 1]".
CLI::Validator finite_in(const std::string& interval, bool (*ok)(double)) {
  return CLI::Validator(
      [interval, ok](std::string& text) -> std::string {
        double v = 0.0;
        try {
          size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size()) return "expected a number in " + interval + ", got " + text;
        } catch (const std::exception&) {
          return "expected a number in " + interval + ", got " + text;
        }
        if (!std::isfinite(v) || !ok(v)) return "expected a number in " + interval + ", got " + text;
        return std::string();
      },
      "NUMBER in " + interval);
}

int fail_generate(const std::string& what) { return command_failed("generate", what); }

}  // namespace

Command add_generate_command(CLI::App& app) {
  struct Options {
    std::string model, prompt, prompt_ids, logits_out, backend = "cpu";
    int64_t max_new_tokens = 32, devices = 1, threads = 0;
    double temperature = 0.0, top_p = 1.0;
    uint64_t seed = 0;
    bool json = false, ignore_eos = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("--model", o->model, "Hugging Face model folder")->required();
  auto* text = app.add_option("--prompt", o->prompt, "prompt text (needs tokenizer.model)");
  auto* ids = app.add_option("--prompt-ids", o->prompt_ids, "prompt token ids, e.g. 1,2,3");
  text->excludes(ids);
  app.add_option("--max-new-tokens", o->max_new_tokens, "tokens to generate")
      ->check(CLI::PositiveNumber);
  app.add_option("--logits-out", o->logits_out,
                 "write float32 logits of every prompt position as .npy [num_prompt_tokens, vocab]");
  app.add_option("--devices", o->devices,
                 "virtual devices (sync wiring): CPU devices, or on cuda devices spread over the "
                 "GPUs")
      ->check(CLI::Range(1, 256));
  app.add_option("--backend", o->backend,
                 "cpu, or cuda (NVIDIA GPUs; needs a build with the CUDA toolkit)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--threads", o->threads,
                 "threads per device for the GEMMs (0 = the machine's hardware threads divided by "
                 "--devices; the output is bitwise the same for any count)")
      ->check(CLI::Range(int64_t{0}, engine::topology::kMaxThreadsPerDevice));
  app.add_option("--temperature", o->temperature, "0 = greedy, in [0, 100]")
      ->check(finite_in("[0, 100]", [](double v) { return v >= 0.0 && v <= 100.0; }));
  app.add_option("--top-p", o->top_p, "nucleus sampling mass, in (0, 1]")
      ->check(finite_in("(0, 1]", [](double v) { return v > 0.0 && v <= 1.0; }));
  app.add_option("--seed", o->seed, "sampling seed");
  app.add_flag("--ignore-eos", o->ignore_eos, "keep generating after EOS");
  app.add_flag("--json", o->json, "print {prompt_ids, output_ids, text} as one JSON object");
  return [o]() {
    if (o->prompt.empty() && o->prompt_ids.empty())
      return fail_generate("give --prompt or --prompt-ids");
    engine::topology::Topology t;
    t.source = "<muflow generate>";
    t.backend = o->backend;
    for (int64_t d = 0; d < o->devices; ++d) {
      t.devices.push_back({o->backend + std::to_string(d), o->backend});
    }
    t.threads_per_device = o->threads;
    t.model.path = o->model;
    t.sampling.temperature = o->temperature;
    t.sampling.top_p = o->top_p;
    t.sampling.seed = o->seed;
    t.sampling.stop_at_eos = !o->ignore_eos;
    absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
    if (!server.ok()) return fail_generate(std::string(server.status().message()));
    engine::serving::Request req;
    req.max_new_tokens = o->max_new_tokens;
    req.return_prompt_logits = !o->logits_out.empty();
    if (!o->prompt.empty()) {
      if (!(*server)->tokenizer()) {
        return fail_generate(o->model +
                             " has no tokenizer.model; give --prompt-ids instead of --prompt");
      }
      req.prompt_text = o->prompt;
      req.prompt = (*server)->tokenizer()->encode(o->prompt, /*add_bos=*/true);
    } else {
      for (absl::string_view piece : absl::StrSplit(o->prompt_ids, ',', absl::SkipWhitespace())) {
        int32_t id = 0;
        if (!absl::SimpleAtoi(piece, &id)) {
          return fail_generate("--prompt-ids: '" + std::string(piece) +
                               "' is not an integer token id");
        }
        req.prompt.push_back(id);
      }
    }
    absl::StatusOr<actors::RunOutcome> out = (*server)->run({req});
    if (!out.ok()) return fail_generate(std::string(out.status().message()));
    const actors::RequestOutput& r = out->outputs.at(0);
    if (!o->logits_out.empty()) {
      absl::Status s = engine::model::write_npy_f32(o->logits_out, r.prompt_logits,
                                                    static_cast<int64_t>(r.prompt.size()),
                                                    (*server)->config().vocab_size);
      if (!s.ok()) return fail_generate(std::string(s.message()));
    }
    const engine::model::Tokenizer* tok = (*server)->tokenizer();
    if (o->json) {
      nlohmann::json j{{"prompt_ids", r.prompt}, {"output_ids", r.output}};
      if (tok) j["text"] = tok->decode(r.output);
      std::printf("%s\n", j.dump().c_str());
    } else if (tok) {
      std::printf("%s%s\n", o->prompt.empty() ? "" : (o->prompt + " ").c_str(),
                  tok->decode(r.output).c_str());
    } else {
      for (size_t i = 0; i < r.output.size(); ++i) std::printf("%s%d", i ? " " : "", r.output[i]);
      std::printf("\n");
    }
    return 0;
  };
}

}  // namespace muflow::tools
