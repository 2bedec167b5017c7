#include "http/server/chat_template.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace muflow::http {

std::string render_plain_chat(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    std::string role = m.role;
    if (!role.empty()) role[0] = static_cast<char>(role[0] - 'a' + 'A');
    out += role + ": " + m.content + "\n";
  }
  return out + "Assistant:";
}

bool model_has_chat_template(const std::string& model_dir) {
  std::ifstream in(model_dir + "/tokenizer_config.json");
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto it = j.find("chat_template");
  return it != j.end() && ((it->is_string() && !it->get_ref<const std::string&>().empty()) ||
                           (it->is_array() && !it->empty()));
}

}  // namespace muflow::http
