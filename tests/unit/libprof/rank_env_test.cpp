// The rank a process takes from its launcher's environment, and the file it names.
#include "sonde/rank_env.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "sonde/output_name.hpp"
#include "sonde/rank_launcher.hpp"

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

TEST(RankEnv, TorchrunsWorkersBeforeTheOuterLaunchersTask) {
  // srun --ntasks-per-node=1 torchrun --nproc_per_node 4: worker 5 runs on node 1 (task 1).
  std::map<std::string, std::string> env = {
      {"SLURM_PROCID", "1"},    {"SLURM_NTASKS", "2"},
      {"SLURM_JOB_ID", "77"},   {"RANK", "5"},
      {"WORLD_SIZE", "8"},      {"LOCAL_RANK", "1"},
      {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "job"}};
  RankEnv r = detect(env);
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.source, "RANK");
  // RANK and WORLD_SIZE set by another hand come after the launchers' own variables, but for
  // SLURM's where they number more ranks than its tasks (below).
  env.erase("TORCHELASTIC_RUN_ID");
  env["WORLD_SIZE"] = "2";
  env["RANK"] = "0";
  EXPECT_EQ(detect(env).rank, 1);
  EXPECT_EQ(detect(env).source, "SLURM_PROCID");
  env["WORLD_SIZE"] = "8";
  env["RANK"] = "5";
  env["OMPI_COMM_WORLD_RANK"] = "3";
  env["OMPI_COMM_WORLD_SIZE"] = "4";
  env["TORCHELASTIC_RUN_ID"] = "job";  // torchrun under mpirun: still torchrun's worker
  EXPECT_EQ(detect(env).rank, 5);
}

TEST(RankEnv, ALaunchersWorkersUnderSrunNumberMoreRanksThanItsTasks) {
  // srun -N 2 deepspeed's launch.py, 4 workers a node: worker 5 (node 1) has RANK and
  // WORLD_SIZE without TORCHELASTIC_RUN_ID; every worker of a node read SLURM_PROCID.
  std::map<std::string, std::string> env = {{"SLURM_PROCID", "1"},  {"SLURM_NTASKS", "2"},
                                            {"SLURM_JOB_ID", "77"}, {"RANK", "5"},
                                            {"WORLD_SIZE", "8"},    {"LOCAL_RANK", "1"}};
  RankEnv r = detect(env);
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.source, "RANK");
  EXPECT_FALSE(r.worker);  // no torchrun's: a launcher there would be its node's launcher
  // RANK set per task from SLURM's (export RANK=$SLURM_PROCID), or per node for torchrun's
  // --node_rank: no more ranks than tasks, SLURM's stay.
  env["RANK"] = "1";
  env["WORLD_SIZE"] = "2";
  EXPECT_EQ(detect(env).source, "SLURM_PROCID");
  env["WORLD_SIZE"] = "1";
  env["RANK"] = "0";
  EXPECT_EQ(detect(env).rank, 1);
  // Open MPI's ranks are no outer job's tasks: read first, whatever RANK says.
  env = {{"OMPI_COMM_WORLD_RANK", "1"},
         {"OMPI_COMM_WORLD_SIZE", "2"},
         {"RANK", "5"},
         {"WORLD_SIZE", "8"}};
  EXPECT_EQ(detect(env).source, "OMPI_COMM_WORLD_RANK");
}

TEST(RankLauncher, KnowsTheCommandsThatStartRanks) {
  using Args = std::vector<std::string>;
  EXPECT_TRUE(launches_ranks(Args{"torchrun", "--nproc_per_node", "2", "t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"/usr/bin/python3", "/usr/local/bin/torchrun", "t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"python3", "-u", "-m", "torch.distributed.run", "t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"python3", "-mtorch.distributed.launch", "t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"python3", "-X", "dev", "-m", "torch.distributed.run"}));
  EXPECT_TRUE(launches_ranks(Args{"python3", "-m", "sonde", "--in-process", "-o", "p.db", "--steps",
                                  "3", "-s", "tottime", "-m", "torch.distributed.run",
                                  "--nproc_per_node", "2", "t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"/opt/ompi/bin/mpirun", "-np", "4", "./a.out"}));
  EXPECT_TRUE(launches_ranks(Args{"srun", "-n", "2", "./a.out"}));
  // DeepSpeed's and Accelerate's: scripts, modules, and accelerate's one subcommand that does.
  EXPECT_TRUE(launches_ranks(Args{"/venv/bin/python3", "/venv/bin/deepspeed", "train.py"}));
  EXPECT_TRUE(launches_ranks(Args{"deepspeed", "--num_gpus", "8", "train.py"}));
  EXPECT_TRUE(launches_ranks(
      Args{"python3", "-u", "-m", "deepspeed.launcher.launch", "--world_info=e30=", "train.py"}));
  EXPECT_TRUE(launches_ranks(Args{"python3", "/venv/bin/accelerate", "launch", "train.py"}));
  EXPECT_TRUE(launches_ranks(Args{"accelerate", "launch", "--multi_gpu", "train.py"}));
  EXPECT_TRUE(launches_ranks(Args{"python3", "-m", "accelerate.commands.launch", "train.py"}));
  EXPECT_TRUE(launches_ranks(
      Args{"python3", "-m", "accelerate.commands.accelerate_cli", "launch", "train.py"}));
  EXPECT_TRUE(launches_ranks(Args{"bash", "-c", "cd /w && accelerate launch train.py"}));
  EXPECT_TRUE(launches_ranks(Args{"env", "X=1", "deepspeed", "train.py"}));
  EXPECT_FALSE(launches_ranks(Args{"python3", "/venv/bin/accelerate", "config"}));
  EXPECT_FALSE(launches_ranks(Args{"accelerate", "env"}));
  EXPECT_FALSE(launches_ranks(Args{"python3", "-m", "accelerate.commands.accelerate_cli", "env"}));
  EXPECT_FALSE(launches_ranks(Args{"python3", "-m", "deepspeed.env_report"}));
  // A program, even one named like a launcher's argument, is none.
  EXPECT_FALSE(launches_ranks(Args{"python3", "train.py", "-m", "torch.distributed.run"}));
  EXPECT_FALSE(launches_ranks(Args{"python3", "-m", "sonde", "-o", "torchrun", "t.py"}));
  EXPECT_FALSE(launches_ranks(Args{"python3", "-c", "import torchrun"}));
  EXPECT_FALSE(launches_ranks(Args{"python3", "-m", "sonde", "-m", "sonde"}));
  EXPECT_FALSE(launches_ranks(Args{"python3", "-W", "torchrun", "t.py"}));
  EXPECT_FALSE(launches_ranks(Args{"./train"}));
  EXPECT_FALSE(launches_ranks(Args{}));
  // A shell whose command runs a launcher (srun's usual wrapper), not one that runs a program.
  EXPECT_TRUE(launches_ranks(Args{"bash", "-c", "torchrun --node_rank=$SLURM_NODEID t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"/bin/sh", "-ec", "exec python3 -m torch.distributed.run t"}));
  EXPECT_TRUE(launches_ranks(Args{"-bash", "-o", "pipefail", "-c", "x=1; /opt/bin/mpirun a"}));
  EXPECT_FALSE(launches_ranks(Args{"bash", "-c", "exec python3 train.py"}));
  EXPECT_FALSE(launches_ranks(Args{"bash", "-c", "python3 train.py --torchrun-like"}));
  EXPECT_FALSE(launches_ranks(Args{"bash", "-c", "# torchrun t.py\npython3 t.py"}));
  EXPECT_FALSE(launches_ranks(Args{"bash", "/nonexistent/train.sh"}));
  EXPECT_FALSE(launches_ranks(Args{"bash"}));
  // A launcher word as a command, not as words of one (echo's text, a trailing comment).
  EXPECT_TRUE(launches_ranks(Args{"bash", "-c", "cd /w && X=1 exec torchrun t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"bash", "-c", "hostname; if true; then srun ./a; fi"}));
  EXPECT_TRUE(launches_ranks(Args{"bash", "-c", "r=$(mpirun -np 2 ./a)"}));
  EXPECT_TRUE(
      launches_ranks(Args{"bash", "-c", "numactl -N 0 python3 -m torch.distributed.run t"}));
  EXPECT_TRUE(launches_ranks(Args{"bash", "-c", "bash -c 'torchrun t.py'"}));  // a shell in it
  EXPECT_FALSE(launches_ranks(Args{"bash", "-c", "echo run me with srun; python3 t.py # srun"}));
  EXPECT_FALSE(launches_ranks(Args{"bash", "-c", "echo 'torchrun'; python3 t.py"}));
  EXPECT_FALSE(launches_ranks(Args{"bash", "-c", "LAUNCHER=torchrun python3 t.py"}));
  // -o and option clusters ending in it take a value (it was read as the script).
  EXPECT_TRUE(launches_ranks(Args{"bash", "-xo", "pipefail", "-c", "torchrun t.py"}));
  // Wrappers run the command after their options: env (and #!/usr/bin/env bash), numactl, ...
  EXPECT_TRUE(launches_ranks(Args{"/usr/bin/env", "X=1", "torchrun", "t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"numactl", "--cpunodebind=0", "torchrun", "t.py"}));
  EXPECT_TRUE(launches_ranks(Args{"apptainer", "exec", "img.sif", "torchrun", "t.py"}));
  EXPECT_FALSE(launches_ranks(Args{"env", "X=1", "python3", "t.py"}));
  EXPECT_FALSE(launches_ranks(Args{"nice", "-n", "5", "./a.out"}));
}

TEST(RankLauncher, ReadsAShellsScript) {
  std::string path = ::testing::TempDir() + "rank_launcher_train.sh";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(
      "#!/bin/bash\n# a comment naming srun\nexport OMP_NUM_THREADS=4\n"
      "  srun --ntasks-per-node=1 python3 train.py\n",
      f);
  std::fclose(f);
  EXPECT_TRUE(launches_ranks(std::vector<std::string>{"bash", "-x", path, "arg"}));
  f = std::fopen(path.c_str(), "w");
  std::fputs("#!/bin/bash\n# srun bash train.sh\nexec python3 train.py  # not srun\n", f);
  std::fclose(f);
  EXPECT_FALSE(launches_ranks(std::vector<std::string>{"bash", path}));
  std::remove(path.c_str());
  // A script in a pipe (bash <(...)) is never read: bash would find it gone.
  std::string fifo = ::testing::TempDir() + "rank_launcher_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(launches_ranks(std::vector<std::string>{"bash", fifo}));  // and no hang
  std::remove(fifo.c_str());
  // A script named like a launcher is one (a site's torchrun wrapper), whatever it holds.
  EXPECT_TRUE(launches_ranks(std::vector<std::string>{"/bin/sh", "/opt/site/bin/torchrun", "t"}));
}

TEST(RankLauncher, ALauncherUnderAnOuterJobIsItsTaskNotARank) {
  std::map<std::string, std::string> env = {
      {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "77"}};
  auto rank_of = [&](const std::vector<std::string>& args) {
    return process_rank_env(
        [&](const char* name) -> const char* {
          auto it = env.find(name);
          return it == env.end() ? nullptr : it->second.c_str();
        },
        args);
  };
  RankEnv agent = rank_of({"torchrun", "t.py"});
  EXPECT_EQ(agent.rank, -1);
  EXPECT_EQ(agent.world_size, -1);
  EXPECT_EQ(agent.outer_task, 1);
  EXPECT_EQ(agent.job, "SLURM_JOB_ID=77;");  // the tasks' run id stays the job's
  EXPECT_EQ(own_output("/d/prof.db", agent), "/d/prof.launcher1.db");
  EXPECT_EQ(rank_of({"bash", "-c", "torchrun t.py"}).outer_task, 1);  // srun's wrapper
  EXPECT_EQ(rank_of({"bash", "-c", "python3 t.py"}).rank, 1);         // a rank's wrapper
  RankEnv program = rank_of({"python3", "t.py"});
  EXPECT_EQ(program.rank, 1);
  EXPECT_EQ(program.outer_task, -1);
  EXPECT_EQ(own_output("/d/prof.db", program), "/d/prof.rank1.db");
  // Under mpirun a shell is its rank's wrapper (mpirun ... bash -c 'exec python3 t.py').
  env = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  EXPECT_EQ(rank_of({"bash", "-c", "exec python3 t.py"}).rank, 1);
  EXPECT_EQ(rank_of({"torchrun", "t.py"}).outer_task, 1);
  // torchrun's worker is a rank, whatever it runs (torchrun --no_python ./train.sh).
  env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "j"}};
  EXPECT_EQ(rank_of({"bash", "-c", "srun hostname"}).rank, 1);
  // RANK set by hand per node (a Kubeflow PyTorchJob's pod running torchrun): its launcher
  // too, and its workers' RANK (torchrun's) the ranks.
  env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "23456"}};
  EXPECT_EQ(rank_of({"torchrun", "--nnodes", "2", "t.py"}).outer_task, 1);
  EXPECT_EQ(rank_of({"python3", "t.py"}).rank, 1);
  // DeepSpeed's launch.py under srun: its node's launcher; its workers' RANK numbers more.
  env = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}};
  EXPECT_EQ(rank_of({"python3", "-m", "deepspeed.launcher.launch", "t.py"}).outer_task, 1);
  env["RANK"] = "5";
  env["WORLD_SIZE"] = "8";
  EXPECT_EQ(rank_of({"python3", "-u", "t.py"}).rank, 5);
  env.clear();  // no outer job: torchrun is the run's root, as always
  EXPECT_EQ(rank_of({"torchrun", "t.py"}).outer_task, -1);
  EXPECT_EQ(own_output("/d/prof.db", rank_of({"torchrun", "t.py"})), "/d/prof.db");
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

TEST(RankOutput, ARanksFileFromItsLaunchersFile) {
  EXPECT_EQ(launcher_output("/d/prof.db", 1), "/d/prof.launcher1.db");
  EXPECT_EQ(launcher_output("/d/prof", 0), "/d/prof.launcher0");
  EXPECT_EQ(rank_output("/d/prof.launcher1.db", 5), "/d/prof.rank5.db");
  EXPECT_EQ(rank_output("/d/prof.launcher1", 5), "/d/prof.rank5");
  // Beside an earlier run's launcher file: the name asked for, not each node's own pid.
  EXPECT_EQ(rank_output("/d/prof.launcher1.4242.db", 5), "/d/prof.rank5.db");
  EXPECT_EQ(launcher_base("/d/prof.launcher1.4242-3.db"), "/d/prof.db");
  EXPECT_EQ(launcher_base("/d/prof.launcher1.4242"), "/d/prof");
  EXPECT_EQ(launcher_base("/d/prof.launcher1.x.db"), "/d/prof.x.db");
  // From another rank's file (its launcher not known as one): "prof.rank1.rank5.db" was found
  // by no reader.
  EXPECT_EQ(rank_output("/d/prof.rank1.db", 5), "/d/prof.rank5.db");
  // A launcher under another's: named from the name asked for, not prof.launcher0.launcher1.db.
  EXPECT_EQ(launcher_output("/d/prof.launcher0.db", 1), "/d/prof.launcher1.db");
  EXPECT_EQ(launcher_base("/d/prof.launcher12.db"), "/d/prof.db");
  EXPECT_EQ(launcher_base("/d/prof.launcherX.db"), "/d/prof.launcherX.db");
  EXPECT_EQ(launcher_base("/d/.launcher1"), "/d/.launcher1");  // a hidden name, not a tag
  EXPECT_EQ(launcher_base("/d.launcher1/prof.db"), "/d.launcher1/prof.db");
  EXPECT_TRUE(is_launcher_output("/d/prof.launcher1.db", 1));
  EXPECT_TRUE(is_launcher_output("/d/prof.launcher1.4242.db", 1));
  EXPECT_FALSE(is_launcher_output("/d/prof.launcher1.db", 0));
  EXPECT_TRUE(is_any_rank_output("/d/prof.rank12.db"));
  EXPECT_TRUE(is_any_rank_output("/d/prof.rank3"));
  EXPECT_FALSE(is_any_rank_output("/d/prof.ranking.db"));
  EXPECT_FALSE(is_any_rank_output("/d.rank3/prof.db"));
}

}  // namespace
}  // namespace sonde
