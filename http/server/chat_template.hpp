#pragma once
/// \file
/// Chat messages → one prompt text. The model folder's `tokenizer_config.json`
/// `chat_template` is a Jinja2 program; no well-kept C++ Jinja renderer is packaged in
/// Debian 12 (inja and minja are not), so `muflow serve` renders the documented plain
/// template below for every model, and says so at startup when a model ships its own
/// template (http/README.md, "Chat template").

#include <string>
#include <vector>

#include "http/server/openai_request.hpp"

namespace muflow::http {

/// The plain template: each message on its own line as "<Role>: <content>" (Role = System,
/// Developer, User, Assistant or Tool), then "Assistant:" for the reply, e.g.
/// [{user, "Who begat Enos?"}] → "User: Who begat Enos?\nAssistant:". Pure.
std::string render_plain_chat(const std::vector<ChatMessage>& messages);

/// True when `model_dir/tokenizer_config.json` holds a non-empty `chat_template` (which the
/// plain template then replaces). Unreadable or absent files count as no template.
bool model_has_chat_template(const std::string& model_dir);

}  // namespace muflow::http
