#include "http/server/openai_request.hpp"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace muflow::http {
namespace {

using nlohmann::json;

// Sets *error to a 400 about `param` and returns false (so checks read `return bad(...)`).
bool bad(ApiError* error, std::string param, std::string message) {
  error->status = 400;
  error->type = "invalid_request_error";
  error->param = std::move(param);
  error->message = std::move(message);
  error->code.clear();
  return false;
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::discarded:
      return "invalid";
    default:
      return "a number";
  }
}

// Reads an optional number field in [lo, hi] into *out. Absent or null leaves *out.
bool read_number(const json& body, const char* key, double lo, double hi, double* out,
                 ApiError* error) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number()) {
    return bad(error, key, std::string("'") + key + "' must be a number, got " + type_name(*it));
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return bad(error, key,
               std::string("'") + key + "' must be in [" + json(lo).dump() + ", " +
                   json(hi).dump() + "], got " + it->dump());
  }
  *out = v;
  return true;
}

// Reads an optional integer field in [lo, hi].
bool read_int(const json& body, const char* key, int64_t lo, int64_t hi,
              std::optional<int64_t>* out, ApiError* error) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  const bool integral =
      it->is_number_integer() ||
      (it->is_number_float() && std::isfinite(it->get<double>()) &&
       std::floor(it->get<double>()) == it->get<double>() && std::fabs(it->get<double>()) < 9.0e15);
  if (!integral) {
    return bad(error, key, std::string("'") + key + "' must be an integer, got " + it->dump());
  }
  int64_t v = 0;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return bad(error, key,
                 std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got " + it->dump());
    }
    v = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else {
    v = static_cast<int64_t>(it->get<double>());
  }
  if (v < lo || v > hi) {
    return bad(error, key,
               std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "], got " + it->dump());
  }
  *out = v;
  return true;
}

bool read_bool(const json& body, const char* key, bool* out, ApiError* error) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    return bad(error, key, std::string("'") + key + "' must be a boolean, got " + type_name(*it));
  }
  *out = it->get<bool>();
  return true;
}

// Fields this server does not implement: present and not at their no-op value → 400.
bool reject_unsupported(const json& body, ApiError* error) {
  for (const char* key : {"logprobs", "top_logprobs", "echo", "suffix", "logit_bias", "tools",
                          "functions", "tool_choice", "response_format"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (it->is_boolean() && !it->get<bool>()) continue;
    if (std::string(key) == "logprobs" && it->is_number_integer() && it->get<int64_t>() == 0) {
      continue;
    }
    return bad(error, key, std::string("'") + key + "' is not supported by muflow serve");
  }
  for (const char* key : {"presence_penalty", "frequency_penalty", "repetition_penalty"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    const double neutral_value = std::string(key) == "repetition_penalty" ? 1.0 : 0.0;
    if (!it->is_number() || it->get<double>() != neutral_value) {
      return bad(error, key,
                 std::string("'") + key +
                     "' is not supported by muflow serve (only its "
                     "neutral value)");
    }
  }
  for (const char* key : {"n", "best_of"}) {
    std::optional<int64_t> n;
    if (!read_int(body, key, std::numeric_limits<int64_t>::min(),
                  std::numeric_limits<int64_t>::max(), &n, error)) {
      return false;
    }
    if (n && *n != 1) {
      return bad(error, key, std::string("'") + key + "' must be 1 (one choice per request)");
    }
  }
  return true;
}

bool read_stop(const json& body, const RequestLimits& limits, std::vector<std::string>* out,
               ApiError* error) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return true;
  std::vector<const json*> items;
  if (it->is_string()) {
    items.push_back(&*it);
  } else if (it->is_array()) {
    if (static_cast<int64_t>(it->size()) > limits.max_stop_strings) {
      return bad(error, "stop",
                 "'stop' has " + std::to_string(it->size()) + " strings; at most " +
                     std::to_string(limits.max_stop_strings));
    }
    for (const json& s : *it) items.push_back(&s);
  } else {
    return bad(
        error, "stop",
        std::string("'stop' must be a string or an array of strings, got ") + type_name(*it));
  }
  for (const json* s : items) {
    if (!s->is_string()) {
      return bad(error, "stop",
                 std::string("'stop' entries must be strings, got ") + type_name(*s));
    }
    const std::string& text = s->get_ref<const std::string&>();
    if (text.empty()) continue;  // an empty stop string never matches anything useful
    if (static_cast<int64_t>(text.size()) > limits.max_stop_bytes) {
      return bad(error, "stop",
                 "a 'stop' string has " + std::to_string(text.size()) + " bytes; at most " +
                     std::to_string(limits.max_stop_bytes));
    }
    out->push_back(text);
  }
  return true;
}

bool read_prompt(const json& body, const RequestLimits& limits, CompletionRequest* req,
                 ApiError* error) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad(error, "prompt", "'prompt' is required");
  const json* p = &*it;
  // A one-element list of strings or of id lists is one prompt.
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    p = &(*p)[0];
  }
  if (p->is_string()) {
    if (p->get_ref<const std::string&>().empty()) {
      return bad(error, "prompt", "'prompt' must not be empty");
    }
    req->prompt_text = p->get<std::string>();
    return true;
  }
  if (!p->is_array()) {
    return bad(
        error, "prompt",
        std::string("'prompt' must be a string or an array of token ids, got ") + type_name(*p));
  }
  if (p->empty()) return bad(error, "prompt", "'prompt' must not be empty");
  if (static_cast<int64_t>(p->size()) > limits.max_prompt_tokens) {
    return bad(error, "prompt",
               "'prompt' has " + std::to_string(p->size()) + " token ids; at most " +
                   std::to_string(limits.max_prompt_tokens));
  }
  req->prompt_ids.reserve(p->size());
  for (const json& id : *p) {
    if (id.is_string() || id.is_array()) {
      return bad(error, "prompt",
                 "'prompt' holds several prompts; muflow serve takes one prompt per request");
    }
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max() ||
        (id.is_number_unsigned() &&
         id.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))) {
      return bad(error, "prompt",
                 "'prompt' token ids must be integers in [0, 2^31), got " + id.dump());
    }
    req->prompt_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return true;
}

bool read_messages(const json& body, const RequestLimits& limits, CompletionRequest* req,
                   ApiError* error) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return bad(error, "messages", "'messages' must be a non-empty array of messages");
  }
  if (static_cast<int64_t>(it->size()) > limits.max_messages) {
    return bad(error, "messages",
               "'messages' has " + std::to_string(it->size()) + " messages; at most " +
                   std::to_string(limits.max_messages));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(error, where, where + " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return bad(error, where + ".role", where + ".role must be a string");
    }
    const std::string& r = role->get_ref<const std::string&>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer") {
      return bad(
          error, where + ".role",
          where + ".role must be one of system, developer, user, assistant, tool; got '" + r + "'");
    }
    ChatMessage msg;
    msg.role = r;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (r != "assistant") return bad(error, where + ".content", where + ".content is required");
    } else if (content->is_string()) {
      msg.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        auto type = part.is_object() ? part.find("type") : part.end();
        auto text = part.is_object() ? part.find("text") : part.end();
        if (!part.is_object() || type == part.end() || *type != "text" || text == part.end() ||
            !text->is_string()) {
          return bad(error, where + ".content",
                     where +
                         ".content parts must be {\"type\": \"text\", \"text\": string} "
                         "(muflow serve takes text only)");
        }
        msg.content += text->get<std::string>();
      }
    } else {
      return bad(error, where + ".content",
                 where + ".content must be a string or an array of text parts, got " +
                     type_name(*content));
    }
    req->messages.push_back(std::move(msg));
  }
  return true;
}

}  // namespace

std::string api_error_body(const ApiError& error) {
  json e = {{"message", error.message},
            {"type", error.type},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)}};
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<CompletionRequest> parse_completion_request(std::string_view body, bool chat,
                                                          const RequestLimits& limits,
                                                          ApiError* error) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    bad(error, "", "the request body is not valid JSON");
    return std::nullopt;
  }
  if (!j.is_object()) {
    bad(error, "", std::string("the request body must be a JSON object, got ") + type_name(j));
    return std::nullopt;
  }
  CompletionRequest req;
  req.chat = chat;
  try {
    if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
      if (!it->is_string()) {
        bad(error, "model", std::string("'model' must be a string, got ") + type_name(*it));
        return std::nullopt;
      }
      req.model = it->get<std::string>();
    }
    if (!reject_unsupported(j, error)) return std::nullopt;
    if (chat ? !read_messages(j, limits, &req, error) : !read_prompt(j, limits, &req, error)) {
      return std::nullopt;
    }
    std::optional<int64_t> max_tokens;
    if (!read_int(j, "max_tokens", 1, limits.max_tokens, &max_tokens, error)) return std::nullopt;
    if (chat && !max_tokens &&
        !read_int(j, "max_completion_tokens", 1, limits.max_tokens, &max_tokens, error)) {
      return std::nullopt;
    }
    req.max_tokens = max_tokens;
    if (!read_number(j, "temperature", 0.0, 2.0, &req.temperature, error)) return std::nullopt;
    if (!read_number(j, "top_p", 0.0, 1.0, &req.top_p, error)) return std::nullopt;
    if (req.top_p <= 0.0) {
      bad(error, "top_p", "'top_p' must be in (0, 1], got 0");
      return std::nullopt;
    }
    std::optional<int64_t> seed;
    if (!read_int(j, "seed", std::numeric_limits<int64_t>::min(),
                  std::numeric_limits<int64_t>::max(), &seed, error)) {
      return std::nullopt;
    }
    if (seed) req.seed = static_cast<uint64_t>(*seed);
    if (!read_stop(j, limits, &req.stop, error)) return std::nullopt;
    if (!read_bool(j, "stream", &req.stream, error)) return std::nullopt;
    if (!read_bool(j, "ignore_eos", &req.ignore_eos, error)) return std::nullopt;
    if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
      if (!it->is_object()) {
        bad(error, "stream_options", "'stream_options' must be an object");
        return std::nullopt;
      }
      if (!read_bool(*it, "include_usage", &req.include_usage, error)) return std::nullopt;
      if (!req.stream) {
        bad(error, "stream_options", "'stream_options' is only allowed when 'stream' is true");
        return std::nullopt;
      }
    }
  } catch (const std::exception& e) {
    // json accessors on a checked type do not throw; this is a last line, naming the cause.
    bad(error, "", std::string("could not read the request body: ") + e.what());
    return std::nullopt;
  }
  return req;
}

}  // namespace muflow::http
