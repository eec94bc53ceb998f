// sonde query: read-only SQL over the profile's tables and views.
#include "profile/query.hpp"

#include <memory>

#include "cli/command.hpp"

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
            file.check_tree_links();  // node_paths and callpaths recurse up the links
            // The user's own SQL may rightly run long (a cross join of a large file): no step
            // limit, Ctrl-C ends it. The views it names are still this sonde's.
            file.set_step_limit(0);
            print_table(run_query(file, a->sql), format, "query", a->file);
            return 0;
          }};
}

}  // namespace sonde::cli
