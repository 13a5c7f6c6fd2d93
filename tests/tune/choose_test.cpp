// tune's choice: constraint flags, the Pareto front, the chosen point, the config it writes.
#include "server/model_config.h"
#include "tune/tune.h"

#include <gtest/gtest.h>

namespace gpuopt::tune {
namespace {

Point offline(int64_t batch, double tp, double p99, int64_t mem, bool ok = true) {
  Point p;
  p.mode = "offline";
  p.precision = "fp16";
  p.batch = batch;
  p.throughput = tp;
  p.p50_ms = p99 / 2;
  p.p99_ms = p99;
  p.memory_bytes = mem;
  p.ok = ok;
  p.oom = !ok;
  return p;
}

TEST(TuneChoose, FrontAndChoiceUnderLatencyBudget) {
  TuneResult r;
  r.options.model_name = "m";
  r.options.device = "cuda";
  r.options.latency_budget_ms = 10;
  r.points = {offline(1, 100, 1, 10), offline(2, 180, 2, 20), offline(4, 170, 3, 40),  // 4 is dominated by 2
              offline(8, 400, 8, 80), offline(16, 600, 15, 160), offline(32, 0, 0, 0, false)};
  choose(&r);
  EXPECT_TRUE(r.points[0].pareto);
  EXPECT_TRUE(r.points[1].pareto);
  EXPECT_FALSE(r.points[2].pareto);
  EXPECT_TRUE(r.points[3].pareto);
  EXPECT_FALSE(r.points[4].pareto);  // over the budget: not feasible, so not on the front
  EXPECT_NE(r.points[4].violates.find("p99 15.00 ms > 10.00 ms"), std::string::npos) << r.points[4].violates;
  EXPECT_EQ(r.points[5].violates, "out of memory");
  EXPECT_EQ(r.chosen, 3);  // the most throughput within the budget
  EXPECT_NE(r.why.find("fp16 batch 8"), std::string::npos) << r.why;
}

TEST(TuneChoose, MemoryAndThroughputConstraints) {
  TuneResult r;
  r.options.model_name = "m";
  r.options.memory_limit = 50;
  r.options.min_throughput = 150;
  r.points = {offline(1, 100, 1, 10), offline(2, 180, 2, 20), offline(8, 400, 8, 80)};
  choose(&r);
  EXPECT_NE(r.points[0].violates.find("< 150.0/s"), std::string::npos);
  EXPECT_NE(r.points[2].violates.find("memory"), std::string::npos);
  EXPECT_EQ(r.chosen, 1);
  r.options.min_throughput = 1000;  // nothing reaches it
  choose(&r);
  EXPECT_EQ(r.chosen, -1);
  EXPECT_NE(r.why.find("no offline point meets the constraints"), std::string::npos);
  EXPECT_EQ(config_pbtxt(r), "");
}

TEST(TuneChoose, OnlinePointsAreChosenOverOffline) {
  TuneResult r;
  r.options.model_name = "m";
  r.options.device = "cuda";
  r.points = {offline(8, 900, 8, 80)};
  Point on = offline(8, 500, 9, 80);
  on.mode = "online";
  on.instances = 2;
  on.delay_us = 500;
  on.concurrency = 16;
  r.points.push_back(on);
  choose(&r);
  EXPECT_EQ(r.chosen, 1);  // served measurements win: they include queueing and the network
  // The written config is Triton's text format that `serve` reads, with the chosen settings.
  auto cfg = server::parse_model_config(config_pbtxt(r), "config.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string() << "\n" << config_pbtxt(r);
  EXPECT_EQ(cfg->name, "m");
  EXPECT_EQ(cfg->max_batch_size, 8);
  ASSERT_TRUE(cfg->dynamic_batching.has_value());
  EXPECT_EQ(cfg->dynamic_batching->max_queue_delay_us, 500u);
  EXPECT_EQ(cfg->dynamic_batching->preferred_batch_size, (std::vector<int64_t>{4, 8}));
  ASSERT_EQ(cfg->instance_groups.size(), 1u);
  EXPECT_EQ(cfg->instance_groups[0].count, 2);
  EXPECT_EQ(cfg->instance_groups[0].kind, server::InstanceKind::kGpu);
  EXPECT_EQ(cfg->precision, "fp16");
  ASSERT_TRUE(cfg->cuda_graphs.has_value());
  EXPECT_TRUE(*cfg->cuda_graphs);
}

TEST(TuneReport, JsonListsEveryPointAndTheFront) {
  TuneResult r;
  r.options.model_name = "m";
  r.points = {offline(1, 100, 1, 10), offline(2, 180, 2, 20), offline(4, 0, 0, 0, false)};
  choose(&r);
  const nlohmann::json j = result_json(r);
  ASSERT_EQ(j["points"].size(), 3u);
  EXPECT_EQ(j["chosen"], 1);
  EXPECT_EQ(j["pareto"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["points"][2]["oom"], true);
  EXPECT_EQ(j["points"][2]["feasible"], false);
  EXPECT_NE(render_table(r).find("CHOSEN"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt::tune
