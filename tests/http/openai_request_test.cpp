// OpenAI request bodies → CompletionRequest, and the 400s bad bodies get.
#include "http/server/openai_request.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>

namespace muflow::http {
namespace {

std::optional<CompletionRequest> parse(const std::string& body, bool chat, ApiError* e) {
  return parse_completion_request(body, chat, RequestLimits{}, e);
}

TEST(OpenAiRequest, CompletionFieldsAndDefaults) {
  ApiError e;
  auto r = parse(R"({"model":"m","prompt":"In the beginning","max_tokens":7,"temperature":0.5,
                     "top_p":0.9,"seed":-3,"stop":"\n","stream":true,
                     "stream_options":{"include_usage":true},"ignore_eos":true,"user":"x"})",
                 false, &e);
  ASSERT_TRUE(r) << e.message;
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(*r->prompt_text, "In the beginning");
  EXPECT_EQ(*r->max_tokens, 7);
  EXPECT_DOUBLE_EQ(r->temperature, 0.5);
  EXPECT_DOUBLE_EQ(r->top_p, 0.9);
  EXPECT_EQ(*r->seed, static_cast<uint64_t>(-3));
  EXPECT_EQ(r->stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r->stream && r->include_usage && r->ignore_eos);

  auto d = parse(R"({"prompt":[1,300,261]})", false, &e);
  ASSERT_TRUE(d) << e.message;
  EXPECT_EQ(d->prompt_ids, (std::vector<int32_t>{1, 300, 261}));
  EXPECT_FALSE(d->max_tokens.has_value());
  EXPECT_DOUBLE_EQ(d->temperature, 1.0);  // OpenAI's default
  EXPECT_FALSE(d->stream);
  // A one-element list of prompts is one prompt.
  auto one = parse(R"({"prompt":["x"]})", false, &e);
  ASSERT_TRUE(one);
  EXPECT_EQ(*one->prompt_text, "x");
}

TEST(OpenAiRequest, ChatMessagesAndTextParts) {
  ApiError e;
  auto r = parse(R"({"messages":[{"role":"system","content":"Be brief."},
                     {"role":"user","content":[{"type":"text","text":"Who "},{"type":"text","text":"begat?"}]}],
                     "max_completion_tokens":3})",
                 true, &e);
  ASSERT_TRUE(r) << e.message;
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[1].role, "user");
  EXPECT_EQ(r->messages[1].content, "Who begat?");
  EXPECT_EQ(*r->max_tokens, 3);
}

struct BadBody {
  bool chat;
  std::string body;
  std::string param;  // the field the error names
};

void PrintTo(const BadBody& b, std::ostream* os) { *os << (b.chat ? "chat " : "") << b.body; }

class OpenAiRequestBad : public ::testing::TestWithParam<BadBody> {};

TEST_P(OpenAiRequestBad, AnswersFourHundredNamingTheField) {
  ApiError e;
  EXPECT_FALSE(parse(GetParam().body, GetParam().chat, &e));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, GetParam().param) << e.message;
  EXPECT_FALSE(e.message.empty());
  const nlohmann::json body = nlohmann::json::parse(api_error_body(e));
  EXPECT_EQ(body["error"]["message"], e.message);
}

INSTANTIATE_TEST_SUITE_P(
    Bodies, OpenAiRequestBad,
    ::testing::Values(
        BadBody{false, "{\"prompt\": ", ""}, BadBody{false, "[1,2]", ""},
        BadBody{false, "{}", "prompt"}, BadBody{false, R"({"prompt":""})", "prompt"},
        BadBody{false, R"({"prompt":[]})", "prompt"},
        BadBody{false, R"({"prompt":[1,-2]})", "prompt"},
        BadBody{false, R"({"prompt":[1,4294967296]})", "prompt"},
        BadBody{false, R"({"prompt":["a","b"]})", "prompt"},
        BadBody{false, R"({"prompt":"x","n":2})", "n"},
        BadBody{false, R"({"prompt":"x","max_tokens":0})", "max_tokens"},
        BadBody{false, R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
        BadBody{false, R"({"prompt":"x","max_tokens":1e300})", "max_tokens"},
        BadBody{false, R"({"prompt":"x","temperature":"hot"})", "temperature"},
        BadBody{false, R"({"prompt":"x","temperature":2.5})", "temperature"},
        BadBody{false, R"({"prompt":"x","top_p":0})", "top_p"},
        BadBody{false, R"({"prompt":"x","seed":1.5})", "seed"},
        BadBody{false, R"({"prompt":"x","stop":[1]})", "stop"},
        BadBody{false, R"({"prompt":"x","stop":["a","b","c","d","e"]})", "stop"},
        BadBody{false, R"({"prompt":"x","stream":"yes"})", "stream"},
        BadBody{false, R"({"prompt":"x","stream_options":{"include_usage":true}})",
                "stream_options"},
        BadBody{false, R"({"prompt":"x","logprobs":3})", "logprobs"},
        BadBody{false, R"({"prompt":"x","presence_penalty":0.5})", "presence_penalty"},
        BadBody{false, R"({"prompt":"x","model":7})", "model"},
        BadBody{true, R"({"messages":[]})", "messages"},
        BadBody{true, R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role"},
        BadBody{true, R"({"messages":[{"role":"user"}]})", "messages[0].content"},
        BadBody{true, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
                "messages[0].content"}),
    [](const ::testing::TestParamInfo<BadBody>& info) {
      std::string name =
          std::to_string(info.index) + "_" + (info.param.param.empty() ? "body" : info.param.param);
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST(OpenAiRequest, DeeplyNestedOrTruncatedBodiesAreRefusedNotCrashed) {
  ApiError e;
  const std::string deep =
      "{\"prompt\":" + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_FALSE(parse(deep, false, &e));
  EXPECT_EQ(e.param, "prompt");
  const std::string valid = R"({"prompt":[1,2,3],"max_tokens":4,"stop":["a"],"stream":true})";
  for (size_t n = 0; n < valid.size(); ++n) {  // every truncation: a 400, never a crash
    EXPECT_FALSE(parse(valid.substr(0, n), false, &e)) << n;
    EXPECT_EQ(e.status, 400);
  }
}

TEST(OpenAiRequest, LimitsBoundPromptIdsAndStopStrings) {
  RequestLimits limits;
  limits.max_prompt_tokens = 3;
  limits.max_stop_bytes = 4;
  ApiError e;
  EXPECT_FALSE(parse_completion_request(R"({"prompt":[1,2,3,4]})", false, limits, &e));
  EXPECT_EQ(e.param, "prompt");
  EXPECT_FALSE(parse_completion_request(R"({"prompt":[1],"stop":"abcde"})", false, limits, &e));
  EXPECT_EQ(e.param, "stop");
}

}  // namespace
}  // namespace muflow::http
