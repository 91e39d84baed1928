// The reuse profile of a repeated lookup stream (ops/model/lookup_reuse.hpp), by hand.
#include "ops/model/lookup_reuse.hpp"

#include <gtest/gtest.h>

#include "tilecomm/error.hpp"

namespace tilecomm::model {
namespace {

// One table looked up as 1, 2, 1, 3 in a loop, rows of 4 KiB. In the loop's second call row 1
// has row 3 between its lookups (2 rows), row 2 has 1 and 3 (3 rows), then 1 has 2 (2 rows) and
// 3 has 1 and 2 (3 rows): a 4 KiB cache (one row) hits none, 8 KiB half, 16 KiB all.
TEST(LookupReuse, CountsTheDistinctRowsBetweenTwoLookupsOfARow) {
  const auto r = lookup_reuse({{1, 2, 1, 3}}, 4096);
  ASSERT_EQ(r.size(), 21u);  // 4 KiB .. 4 GiB
  EXPECT_EQ(r[0].bytes, 4096);
  EXPECT_EQ(r[0].share, 0);
  EXPECT_EQ(r[1].share, 0.5);
  EXPECT_EQ(r[2].share, 1.0);
  EXPECT_EQ(r.back().bytes, 4294967296.0);
  EXPECT_EQ(r.back().share, 1.0);
}

// The same row number in two tables is two rows: each lookup has the other between it and its
// last one.
TEST(LookupReuse, TablesKeepTheirRowsApart) {
  const auto r = lookup_reuse({{5}, {5}}, 4096);
  EXPECT_EQ(r[0].share, 0);
  EXPECT_EQ(r[1].share, 1.0);
  EXPECT_EQ(lookup_reuse({}, 256)[0].share, 0);  // no lookups
}

TEST(LookupReuse, SharesInterpolateInLog2OfTheBytes) {
  const std::vector<ReusePoint> r{{4096, 0}, {16384, 1}};
  EXPECT_EQ(reuse_share(r, 1024), 0);
  EXPECT_DOUBLE_EQ(reuse_share(r, 8192), 0.5);
  EXPECT_EQ(reuse_share(r, 1 << 20), 1);
  EXPECT_EQ(reuse_share({}, 8192), 0);
}

TEST(LookupReuse, ParsesWhatItFormatsAndNamesBadItems) {
  const std::vector<ReusePoint> r{{4096, 0.25}, {8192, 0.5}};
  EXPECT_EQ(format_reuse(r), "4096:0.25,8192:0.5");
  const auto back = parse_reuse(format_reuse(r));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].bytes, 8192);
  EXPECT_EQ(back[1].share, 0.5);
  EXPECT_TRUE(parse_reuse("").empty());
  auto refused = [](const char* text, const char* names) {
    try {
      parse_reuse(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
  };
  refused("4096", "'4096' is not BYTES:SHARE");
  refused("4096:x", "'4096:x' has a bad number");
  refused("4096:0.5x", "'4096:0.5x' has a bad number");
  refused("4096:1.5", "outside [0, 1]");
  refused("0:0.5", "bytes <= 0");
  refused("8192:0.5,4096:0.6", "'4096:0.6' does not follow");
  refused("4096:0.5,8192:0.4", "'8192:0.4' does not follow");
}

}  // namespace
}  // namespace tilecomm::model
