// The rank a process takes from its launcher's environment, and the file it names.
#include "sonde/rank_env.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sonde/output_name.hpp"

namespace sonde {
namespace {

RankEnv detect(const std::map<std::string, std::string>& env) {
  return detect_rank_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(RankEnv, NoLauncherNoRank) {
  RankEnv r = detect({{"HOME", "/root"}});
  EXPECT_EQ(r.rank, -1);
  EXPECT_EQ(r.world_size, -1);
}

TEST(RankEnv, OpenMpi) {
  RankEnv r = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                      {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"OMPI_MCA_ess_base_jobid", "1374879745"},
                      {"RANK", "0"},
                      {"WORLD_SIZE", "8"}});
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.source, "OMPI_COMM_WORLD_RANK");  // before torch's RANK
  EXPECT_EQ(r.job, "OMPI_MCA_ess_base_jobid=1374879745;");
}

TEST(RankEnv, SlurmNeedsMoreThanOneTask) {
  EXPECT_EQ(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).rank, -1);
  RankEnv r = detect({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_JOB_ID", "77"}});
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.local_rank, -1);
  EXPECT_EQ(r.job, "SLURM_JOB_ID=77;");
}

TEST(RankEnv, TorchDistributed) {
  RankEnv r = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.local_rank, 1);
}

TEST(RankEnv, BadValuesAreNoRank) {
  EXPECT_EQ(detect({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).rank, -1);  // not below the size
  EXPECT_EQ(detect({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}).rank, -1);
  EXPECT_EQ(detect({{"RANK", "1x"}, {"WORLD_SIZE", "2"}}).rank, -1);
  EXPECT_EQ(detect({{"RANK", "1"}}).rank, -1);  // no size
  EXPECT_EQ(detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "99999999999"}}).rank, -1);
}

TEST(RankOutput, NamesTheRanksFile) {
  EXPECT_EQ(rank_output("/d/prof.db", 3), "/d/prof.rank3.db");
  EXPECT_EQ(rank_output("/d.x/prof", 0), "/d.x/prof.rank0");
  EXPECT_EQ(rank_output("/d/.hidden", 2), "/d/.hidden.rank2");
  EXPECT_TRUE(is_rank_output("/d/prof.rank3.db", 3));
  EXPECT_TRUE(is_rank_output("/d/prof.rank3.1234.db", 3));  // an alternative beside a taken one
  EXPECT_TRUE(is_rank_output("/d/prof.rank3", 3));
  EXPECT_FALSE(is_rank_output("/d/prof.rank3.db", 1));
  EXPECT_FALSE(is_rank_output("/d/prof.rank31.db", 3));
  EXPECT_FALSE(is_rank_output("/d.rank3.x/prof.db", 3));  // a directory's name is not the file's
}

}  // namespace
}  // namespace sonde
