// sonde query: read-only SQL over the profile's tables and views.
#include <memory>

#include "cli/command.hpp"
#include "profile/query.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::string sql;
};
}  // namespace

Command add_query(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("query", "Read-only SQL over the profile's tables and views");
  add_file(cmd, a->file);
  cmd->add_option("sql", a->sql, "SQL, e.g. \"SELECT * FROM hotspots ORDER BY excl_s DESC\"")
      ->required();
  add_format(cmd, a->format, {"text", "csv", "json"});
  return {cmd, [a] {
            Format format = parse_format(a->format);
            ProfileFile file = ProfileFile::open(a->file);
            print_table(run_query(file, a->sql), format);
            return 0;
          }};
}

}  // namespace sonde::cli
