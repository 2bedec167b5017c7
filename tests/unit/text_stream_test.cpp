// Incremental detokenization: stop strings cut the text and are held back while partial;
// incomplete UTF-8 (U+FFFD at the end) is held back until it completes.
#include "engine/model/text_stream.hpp"

#include <gtest/gtest.h>

#include <map>

namespace muflow::engine::model {
namespace {

// A toy vocabulary: each id decodes to a fixed piece, except that 90 followed by 91 forms
// "é" (0xC3 0xA9) and 90 alone decodes to U+FFFD, as SentencePiece byte fallback does.
std::string decode(const std::vector<int32_t>& ids) {
  static const std::map<int32_t, std::string> pieces = {{1, "And"}, {2, " God"},  {3, " said"},
                                                        {4, ","},   {5, " Let"},  {6, " there"},
                                                        {7, " be"}, {8, " light"}};
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == 90 && i + 1 < ids.size() && ids[i + 1] == 91) {
      out += "\xC3\xA9";
      ++i;
    } else if (ids[i] == 90) {
      out += "\xEF\xBF\xBD";
    } else {
      out += pieces.at(ids[i]);
    }
  }
  return out;
}

std::string run(TextStream& s, const std::vector<int32_t>& ids, std::vector<std::string>* deltas) {
  std::string all;
  for (int32_t id : ids) {
    deltas->push_back(s.push(id));
    all += deltas->back();
  }
  return all;
}

TEST(TextStream, WithoutStopStringsReleasesEveryPieceAtOnce) {
  TextStream s(decode, {}, {});
  std::vector<std::string> d;
  EXPECT_EQ(run(s, {1, 2, 3}, &d), "And God said");
  EXPECT_EQ(d, (std::vector<std::string>{"And", " God", " said"}));
  EXPECT_EQ(s.flush(), "");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, StopStringEndsTheTextBeforeIt) {
  TextStream s(decode, {}, {" said,"});
  std::vector<std::string> d;
  const std::string all = run(s, {1, 2, 3, 4, 5}, &d);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(all, "And God");
  EXPECT_EQ(s.text(), "And God");
  // " said" could still become " said,": held back, then dropped with the match.
  EXPECT_EQ(d[2], "");
  EXPECT_EQ(s.push(6), "");  // ignored after the stop
  EXPECT_EQ(s.ids().size(), 4u);
}

TEST(TextStream, PartialStopStringIsReleasedWhenItCannotMatch) {
  TextStream s(decode, {}, {" said nothing"});
  std::vector<std::string> d;
  EXPECT_EQ(run(s, {1, 2, 3}, &d), "And God");  // " said" held back
  EXPECT_EQ(s.push(4), " said,");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, StopStringSpanningTokens) {
  TextStream s(decode, {}, {"there be"});
  std::vector<std::string> d;
  EXPECT_EQ(run(s, {1, 5, 6, 7, 8}, &d), "And Let ");
  EXPECT_TRUE(s.stopped());
}

TEST(TextStream, ContextMakesTheLeadingSpaceAndIsNotOutput) {
  // Without context the first piece's text is what it decodes to alone; with the prompt's
  // last tokens as context, only the continuation is released.
  TextStream s(decode, {1, 2}, {});
  EXPECT_EQ(s.push(3), " said");
  EXPECT_EQ(s.push(4), ",");
  EXPECT_EQ(s.text(), " said,");
  EXPECT_EQ(s.ids(), (std::vector<int32_t>{3, 4}));
}

TEST(TextStream, IncompleteUtf8IsHeldBack) {
  TextStream s(decode, {}, {});
  EXPECT_EQ(s.push(1), "And");
  EXPECT_EQ(s.push(90), "");  // half a character
  EXPECT_EQ(s.push(91), "\xC3\xA9");
  EXPECT_EQ(s.text(), "And\xC3\xA9");
  TextStream t(decode, {}, {});
  EXPECT_EQ(t.push(90), "");
  EXPECT_EQ(t.flush(), "\xEF\xBF\xBD");  // at the end it is what it is
}

}  // namespace
}  // namespace muflow::engine::model
