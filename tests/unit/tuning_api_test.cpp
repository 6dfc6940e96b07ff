// The public tuning-file API (collx/tuning.hpp), as collx-bench --save-tuning uses it: through
// the public headers only.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "collx/error.hpp"
#include "collx/tuning.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::TuningFile;
using collx::TuningRule;

std::string temp_path(const char* name) {
  return testing::TempDir() + name;
}

TEST(TuningApi, SaveLoadRoundTripAndReplace) {
  const std::string path = temp_path("tuning_api_roundtrip.json");
  TuningFile file;
  file.machine = "test";
  file.segment_bytes = 64 << 10;
  file.pipeline_depth = 4;
  const std::vector<TuningRule> two_ranks = {
      {Collective::allreduce, 2, 2, 1024, Algorithm::recursive_doubling},
      {Collective::allreduce, 2, 2, collx::kAnyBytes, Algorithm::ring}};
  collx::replace_tuning_rules(file, Collective::allreduce, 2, two_ranks);
  collx::replace_tuning_rules(
      file, Collective::broadcast, 4,
      std::vector<TuningRule>{
          {Collective::broadcast, 4, 4, collx::kAnyBytes, Algorithm::pipelined_chain}});
  collx::save_tuning_file(path, file);

  TuningFile back = collx::load_tuning_file(path);
  EXPECT_EQ(back.machine, "test");
  EXPECT_EQ(back.segment_bytes, 64u << 10);
  EXPECT_EQ(back.pipeline_depth, 4);
  ASSERT_EQ(back.rules.size(), 3u);
  EXPECT_EQ(back.rules[0].max_bytes, 1024u);
  EXPECT_EQ(back.rules[0].algorithm, Algorithm::recursive_doubling);
  EXPECT_EQ(back.rules[1].max_bytes, collx::kAnyBytes);
  EXPECT_EQ(back.rules[2].collective, Collective::broadcast);

  // Measuring allreduce on 2 ranks again replaces those rules only, and appends the new ones.
  collx::replace_tuning_rules(back, Collective::allreduce, 2,
                              std::vector<TuningRule>{{Collective::allreduce, 2, 2,
                                                       collx::kAnyBytes, Algorithm::rabenseifner}});
  ASSERT_EQ(back.rules.size(), 2u);
  EXPECT_EQ(back.rules[0].collective, Collective::broadcast);
  EXPECT_EQ(back.rules[1].algorithm, Algorithm::rabenseifner);
  std::remove(path.c_str());
}

TEST(TuningApi, WhatCouldNotBeReadBackIsNotWritten) {
  const std::string path = temp_path("tuning_api_rejected.json");
  std::remove(path.c_str());
  const std::vector<TuningRule> unreadable = {
      {Collective::allreduce, 2, 2, collx::kAnyBytes, Algorithm::automatic},
      {Collective::allreduce, 2, 2, collx::kAnyBytes, Algorithm::bruck},
      {Collective::allreduce, 3, 2, collx::kAnyBytes, Algorithm::ring},
      {Collective::allreduce, 0, 2, collx::kAnyBytes, Algorithm::ring}};
  for (const TuningRule& rule : unreadable) {
    TuningFile file;
    file.rules.push_back(rule);
    try {
      collx::save_tuning_file(path, file);
      ADD_FAILURE() << "written: " << collx::to_string(rule.algorithm) << " " << rule.min_ranks
                    << ".." << rule.max_ranks;
    } catch (const collx::Error& e) {
      EXPECT_EQ(e.code(), collx::ErrorCode::invalid_argument);
    }
  }
  TuningFile deep;
  deep.pipeline_depth = 65;
  EXPECT_THROW(collx::save_tuning_file(path, deep), collx::Error);
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST(TuningApi, ReplaceTakesRulesOfItsCollectiveAndRankCountOnly) {
  TuningFile file;
  const std::vector<TuningRule> other_ranks = {
      {Collective::allreduce, 2, 4, collx::kAnyBytes, Algorithm::ring}};
  const std::vector<TuningRule> other_collective = {
      {Collective::broadcast, 2, 2, collx::kAnyBytes, Algorithm::binomial_tree}};
  EXPECT_THROW(collx::replace_tuning_rules(file, Collective::allreduce, 2, other_ranks),
               collx::Error);
  EXPECT_THROW(collx::replace_tuning_rules(file, Collective::allreduce, 2, other_collective),
               collx::Error);
  EXPECT_THROW(collx::replace_tuning_rules(file, Collective::allreduce, 0, {}), collx::Error);
  EXPECT_TRUE(file.rules.empty());
}

TEST(TuningApi, UnreadableFilesAreConfigErrors) {
  const std::string path = temp_path("tuning_api_bad.json");
  std::ofstream(path) << "not json";
  try {
    collx::load_tuning_file(path);
    ADD_FAILURE() << "accepted a file that is not JSON";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::config);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  std::remove(path.c_str());
}

}  // namespace
