#include "process/run_info.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>

namespace sonde {
namespace {

TEST(RunInfo, EnvironmentAllowListKeepsTuningVariables) {
  for (const char* name :
       {"SONDE_TRACE", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
        "PYTHONHASHSEED", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG"}) {
    EXPECT_TRUE(environment_allowed(name)) << name;
  }
}

TEST(RunInfo, EnvironmentAllowListRejectsEverythingElse) {
  for (const char* name : {"AWS_SECRET_ACCESS_KEY",
                           "HOME",
                           "PATH",
                           "GITHUB_TOKEN",
                           "",
                           "XSONDE_X",
                           "sonde_x",
                           "LD_PRELOAD",
                           "SONDE_X",
                           "SONDE_API_KEY",
                           "SONDE_PROCESS",
                           "PYTHON_API_TOKEN",
                           "PYTHONSTARTUP",
                           "PYTHONPATH",
                           "CUDA_SECRET",
                           "CUDA_ANYTHING",
                           "NCCL_PASSWORD",
                           "OMP_AUTH",
                           "MKL_LICENSE_KEY",
                           "OPENBLAS_CREDENTIAL"}) {
    EXPECT_FALSE(environment_allowed(name)) << name;
  }
}

TEST(RunInfo, AllowedEnvironmentListsOnlyAllowedVariablesWithTheirValues) {
  ASSERT_EQ(setenv("OMP_NUM_THREADS", "3", 1), 0);
  ASSERT_EQ(setenv("GITHUB_TOKEN", "ghp_secret", 1), 0);
  auto env = allowed_environment();
  unsetenv("GITHUB_TOKEN");
  auto has = [&](const std::string& key) {
    return std::find_if(env.begin(), env.end(), [&](auto& kv) { return kv.first == key; });
  };
  auto omp = has("env.OMP_NUM_THREADS");
  ASSERT_NE(omp, env.end());
  EXPECT_EQ(omp->second, "3");
  EXPECT_EQ(has("env.GITHUB_TOKEN"), env.end());
  for (const auto& [key, value] : env) {
    ASSERT_EQ(key.rfind("env.", 0), 0u) << key;
    EXPECT_TRUE(environment_allowed(key.substr(4))) << key;
    EXPECT_EQ(value.find("ghp_secret"), std::string::npos) << key;
  }
}

TEST(RunInfo, RunUuidsAreHexAndDistinct) {
  std::string a = new_run_uuid(), b = new_run_uuid();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

TEST(RunInfo, CollectRunInfoDescribesThisMachine) {
  RunInfo r = collect_run_info("u", read_command_line(true), true, 42);
  EXPECT_EQ(r.uuid, "u");
  EXPECT_EQ(r.mode, "trace");
  EXPECT_EQ(r.started_ns, 42);
  EXPECT_GE(r.cores, 1);
  EXPECT_GE(r.affinity_cores, 1);
  EXPECT_LE(r.affinity_cores, r.cores);
  EXPECT_NE(r.command.find("sonde_libprof_tests"), std::string::npos) << r.command;
  EXPECT_EQ(collect_run_info("u", "x", false, 0).mode, "profile");
  // The first "model name" line of /proc/cpuinfo, as the test reads it whole (x86 has one).
  std::ifstream in("/proc/cpuinfo");
  std::string line, model;
  while (model.empty() && std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0)
      model = line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
  }
  EXPECT_EQ(r.cpu_model, model);
#if defined(__x86_64__)
  EXPECT_FALSE(r.cpu_model.empty());
#endif
}

// The redaction rules word by word, joined by spaces (the quoting is tested apart below).
std::string words(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& w : redact_words(argv)) out += (out.empty() ? "" : " ") + w;
  return out;
}

TEST(RunInfo, SecretLookingArgumentValuesAreRedacted) {
  std::vector<std::string> argv = {
      "./train", "--password=hunter2", "--api-key", "sk-1", "--steps", "3", "GH_TOKEN=ghp", "-p",
      "--Auth",  "--verbose",          "x"};
  EXPECT_EQ(words(argv),
            "./train --password=<redacted> --api-key <redacted> --steps 3 GH_TOKEN=<redacted> "
            "-p --Auth --verbose x");
  EXPECT_EQ(redact_arguments(argv, false), "./train");
  EXPECT_EQ(words({"x", "--db=postgres://ann:pw1@db:5432/x", "http://h/a@b:c"}),
            "x --db=postgres://ann:<redacted>@db:5432/x http://h/a@b:c");
  EXPECT_EQ(words({}), "");
}

// Forms a new user's command lines had that the first rules missed (red-team run).
TEST(RunInfo, SecretsInsideOneArgumentHeadersAndTokenUrlsAreRedacted) {
  EXPECT_EQ(words({"x", "--password pw1", "Authorization: Bearer ab2", "--pwd=p3", "--bearer", "b4",
                   "--mysql-pwd=p5", "--lr 0.1"}),
            "x --password <redacted> Authorization: <redacted> --pwd=<redacted> --bearer "
            "<redacted> --mysql-pwd=<redacted> --lr 0.1");
  EXPECT_EQ(words({"git", "clone", "https://ghp_tok@github.com/a/b"}),
            "git clone https://<redacted>@github.com/a/b");
}

// The second red-team run's forms: a password holding '@', a name=value inside a value, a
// header given as an option's value, an option's colon form, curl's user:password, and quoted
// values in the code of `python3 -c`.
TEST(RunInfo, NestedColonAndQuotedSecretsAreRedacted) {
  EXPECT_EQ(words({"x", "https://u:p1_AA@ss_BB@host/x?a=b@c"}),
            "x https://u:<redacted>@host/x?a=b@c");
  EXPECT_EQ(words({"x", "--env=AWS_SECRET_ACCESS_KEY=eq_QQ", "--header=X-Api-Key: hk",
                   "--env=PATH=/bin"}),
            "x --env=AWS_SECRET_ACCESS_KEY=<redacted> --header=X-Api-Key: <redacted> "
            "--env=PATH=/bin");
  EXPECT_EQ(words({"curl", "--password:colonpw", "-u", "me:curlpw", "-o", "out"}),
            "curl --password:<redacted> -u me:<redacted> -o out");
  EXPECT_EQ(words({"python3", "-c",
                   "import numpy; API_KEY='sk-mid'; password = \"pw\"; n = 'keep'; "
                   "d = {'token': 'tk'}; ok = key == 'k'"}),
            "python3 -c import numpy; API_KEY='<redacted>'; password = \"<redacted>\"; "
            "n = 'keep'; d = {'token': '<redacted>'}; ok = key == 'k'");
}

// The third red-team run's: a wrapper's shell line holds whole commands, whose options are
// words of one argument, a secret one anywhere among them (only the first split was looked
// at); and a header or config pair with no space after its colon.
TEST(RunInfo, SecretsInsideAShellLineAreRedacted) {
  EXPECT_EQ(words({"/bin/sh", "-c",
                   "./blas 1 0 --password=SQ1 >/dev/null; /x --token=SQ2; exec "
                   "./blas --api-key SQ3 --lr 0.1"}),
            "/bin/sh -c ./blas 1 0 --password=<redacted> >/dev/null; /x --token=<redacted> "
            "exec ./blas --api-key <redacted> --lr 0.1");
  EXPECT_EQ(words({"bash", "-c",
                   "export API_TOKEN=at1; curl -H \"Authorization: Bearer b1\" "
                   "-u me:up1 https://u:pp1@h/x\n\tjava -Dpassword=jp1 -Xmx1g"}),
            "bash -c export API_TOKEN=<redacted> curl -H \"Authorization: Bearer <redacted> "
            "-u me:<redacted> https://u:<redacted>@h/x\n\tjava -Dpassword=<redacted> -Xmx1g");
  EXPECT_EQ(words({"x", "x-api-key:hv", "api_key:cv", "https://host:443/p", "a:b"}),
            "x x-api-key:<redacted> api_key:<redacted> https://host:443/p a:b");
  // Spacing and what is not secret are kept as they were.
  EXPECT_EQ(words({"sh", "-c", "python  train.py\t--epochs 3"}),
            "sh -c python  train.py\t--epochs 3");
}

// Issue 37's spellings, stored in clear before: URL passwords holding '/' or '#', a bare
// config key, --creds and --jwt, a value starting with '-', URL signatures, environment
// variables set in `python3 -c` code, and an empty word or `--` between option and value.
TEST(RunInfo, IssueThirtySevenSpellingsAreRedacted) {
  EXPECT_EQ(words({"x", "postgres://u:S1/x@h/db", "redis://:S2#x@h:6379/0", "redis://:4242#x@h",
                   "http://[::1]:S3/y@h"}),
            "x postgres://u:<redacted>@h/db redis://:<redacted>@h:6379/0 "
            "redis://:<redacted>@h http://[::1]:<redacted>@h");
  EXPECT_EQ(words({"aws", "configure", "set", "aws_secret_access_key", "S4"}),
            "aws configure set aws_secret_access_key <redacted>");
  EXPECT_EQ(words({"x", "--creds", "S5", "--jwt", "S6", "--ssh-key",
                   "-----BEGIN OPENSSH PRIVATE KEY-----\nS7\n-----END"}),
            "x --creds <redacted> --jwt <redacted> --ssh-key <redacted>");
  EXPECT_EQ(
      words({"curl", "https://b.s3.amazonaws.com/o?X-Amz-Date=1&X-Amz-Signature=S8",
             "https://h/f?exp=1&sig=S9#top", "--sas", "sv=1&sig=S10", "--blob=sv=1&sp=r&sig=S11"}),
      "curl https://b.s3.amazonaws.com/o?X-Amz-Date=1&X-Amz-Signature=<redacted> "
      "https://h/f?exp=1&sig=<redacted>#top --sas <redacted> "
      "--blob=sv=1&sp=r&sig=<redacted>");
  EXPECT_EQ(words({"python3", "-c",
                   "import os; os.environ[\"HF_TOKEN\"] = \"S12\"; "
                   "os.environ.setdefault('WANDB_API_KEY', 'S13'); x = {'n': 'keep'}"}),
            "python3 -c import os; os.environ[\"HF_TOKEN\"] = \"<redacted>\"; "
            "os.environ.setdefault('WANDB_API_KEY', '<redacted>'); x = {'n': 'keep'}");
  EXPECT_EQ(words({"x", "--access-token", "", "S14", "--hf_token", "--", "S15"}),
            "x --access-token  <redacted> --hf_token -- <redacted>");
}

// What the rules above must leave alone.
// The fourth red-team run's: short names of a password or a one-time code, tokens known by
// their provider's prefix given bare (a positional argument, inside -c code), a chat webhook's
// secret path.
TEST(RunInfo, ShortPasswordNamesKnownTokensAndWebhooksAreRedacted) {
  EXPECT_EQ(
      words({"x", "--pw", "V1", "--psw=V2", "--otp", "V3", "--mnemonic", "V4", "--opts=pw=V5"}),
      "x --pw <redacted> --psw=<redacted> --otp <redacted> --mnemonic <redacted> "
      "--opts=pw=<redacted>");
  EXPECT_EQ(words({"x", "sk-proj-Ab3dEfGh1jKlMn0pQrSt", "ghp_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2",
                   "AKIAIOSFODNN7EXAMPLE", "xoxb-1234567890-1234567890-AbCdEfGhIjKlMnOpQrStUvWx",
                   "sk_live_51HAbCdEfGhIjKlMnOp", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv"}),
            "x <redacted> <redacted> <redacted> <redacted> <redacted> <redacted>");
  // --jwt-file names a file, whose name is redacted too (the JWT rule's word is a part);
  // the token itself given bare is.
  EXPECT_EQ(words({"x", "--jwt-file", "a.txt",
                   "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"}),
            "x --jwt-file <redacted> <redacted>");
  EXPECT_EQ(
      words({"python3", "-c", "login('alice', pw='C10pw'); k = 'hf_AbCdEfGhIjKlMnOpQrStUvWxYz'"}),
      "python3 -c login('alice', pw='<redacted>'); k = '<redacted>'");
  // Names that begin like a token but hold no random part stay (a red-team run found run
  // folders and checkpoints redacted by the first version of the rule).
  EXPECT_EQ(
      words({"x", "--output-dir", "runs/sk-resnet50-baseline-long", "--hf-cache",
             "/data/hf_cache_directory_long", "--ckpt", "hf_checkpoints_v2_final_step_1000.pt",
             "npm_pretrain_bert_large_uncased", "xoxb-not-really-a-token-at-all"}),
      "x --output-dir runs/sk-resnet50-baseline-long --hf-cache "
      "/data/hf_cache_directory_long --ckpt hf_checkpoints_v2_final_step_1000.pt "
      "npm_pretrain_bert_large_uncased xoxb-not-really-a-token-at-all");
  EXPECT_EQ(words({"x", "--hook", "https://hooks.slack.com/services/T0/B0/ARG15xyz"}),
            "x --hook https://hooks.slack.com/services/<redacted>");
  // Words that only begin like one, or short ones, stay: a task name, a tokenizer file.
  EXPECT_EQ(words({"x", "--task", "sk-learn", "ghp_short", "--pin-memory", "1", "--pipeline", "2",
                   "--power", "3"}),
            "x --task sk-learn ghp_short --pin-memory 1 --pipeline 2 --power 3");
}

TEST(RunInfo, OrdinaryValuesBesideTheNewRulesStay) {
  std::vector<std::string> argv = {"x",
                                   "--lr",
                                   "0.1",
                                   "--data",
                                   "/path/with#hash",
                                   "https://host:443/p@scope/pkg",
                                   "--out",
                                   "run.sig",
                                   "tokenizer_config.json",
                                   "--sigma",
                                   "2",
                                   "--token",
                                   "--verbose",
                                   "a&b=c",
                                   "http://h/a@b:c"};
  std::string joined;
  for (const std::string& a : argv) joined += (joined.empty() ? "" : " ") + a;
  EXPECT_EQ(words(argv), joined);
  EXPECT_EQ(words({"python3", "-c", "import sys; n = \"keep-me\"; print(n, 1 == 2)"}),
            "python3 -c import sys; n = \"keep-me\"; print(n, 1 == 2)");
}

// The recorded line says where each argument ends, as a shell would need it (the report's
// `command:` line showed `--name my run` for one argument; diff compared such lines word by word).
TEST(RunInfo, RecordedCommandLinesAreQuotedAsAShellReadsThem) {
  EXPECT_EQ(redact_arguments({"python3", "train.py", "--name", "my run", "--tag=a;b", "", "#c",
                              "~x", "a~b", "ünï.py", "--lr=1e-3", "--password", "pw 1"},
                             true),
            "python3 train.py --name 'my run' '--tag=a;b' '' '#c' '~x' a~b ünï.py --lr=1e-3 "
            "--password <redacted>");
  EXPECT_EQ(redact_arguments({"python3", "-c", "print('a b')"}, true),
            "python3 -c \"print('a b')\"");
  EXPECT_EQ(redact_arguments({"python3", "-c", "print(\"it's $HOME\")"}, true),
            "python3 -c 'print(\"it'\\''s $HOME\")'");
  EXPECT_EQ(redact_arguments({"/opt/my dir/python3"}, false), "'/opt/my dir/python3'");
  // Read back, every word is the one given.
  // Control characters in bash's $'...': a tab is not the two characters \t typed.
  EXPECT_EQ(redact_arguments({"py", "tab\there", "tab\\there", "x=1\nprint(x)", "\x01"}, true),
            "py $'tab\\there' 'tab\\there' $'x=1\\nprint(x)' $'\\x01'");
  std::vector<std::string> argv = {"py", "a b", "it's",      "\"q\" $x `y` \\z",
                                   "",   "\t",  "it's\n\\n", "\x1f"};
  EXPECT_EQ(shell_words(redact_arguments(argv, true)), argv);
  // A line of before the quoting that happens to hold $'\x with no hex digits: read, no throw.
  EXPECT_EQ(shell_words("echo $'\\xZZ' done"), (std::vector<std::string>{"echo", "xZZ", "done"}));
  EXPECT_EQ(shell_words("tail $'\\x4"), (std::vector<std::string>{"tail", "x4"}));
  EXPECT_EQ(shell_words("old  line\twith spaces"),
            (std::vector<std::string>{"old", "line", "with", "spaces"}));
}

TEST(RunInfo, SecretLookingNames) {
  for (const char* name : {"token", "MY_SECRET", "apikey", "db-passwd", "Credentials", "OAUTH"})
    EXPECT_TRUE(name_looks_secret(name)) << name;
  for (const char* name : {"--steps", "OMP_NUM_THREADS", "--lr", ""})
    EXPECT_FALSE(name_looks_secret(name)) << name;
  // Ordinary ML options a substring rule took for secrets (a red-team run), and some that stay.
  for (const char* name :
       {"--max_new_tokens", "--tokenizer", "--tokenizer_name", "--pad_token_id", "--eos-token",
        "--num-tokens", "--token-budget", "--key-dim", "--kv_key_size", "--rope_key", "--sort-key",
        "--keypoints", "--num-passes", "--passes", "--bypass", "--authors"})
    EXPECT_FALSE(name_looks_secret(name)) << name;
  for (const char* name : {"--hf_token", "--api-key", "GH_TOKEN", "--wandb-key", "hfToken",
                           "--access_token", "--pass", "--auth", "--secret-key", "AUTH_TOKEN"})
    EXPECT_TRUE(name_looks_secret(name)) << name;
}

}  // namespace
}  // namespace sonde
