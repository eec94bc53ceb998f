// The files the commands write where they are told (-o, --html). A new or regular file is
// written beside and renamed over, so that a failure leaves what was there; a path that names
// something else is written through, as a shell's `>` would, and never replaced: renaming over
// it made, as root, `sonde export -o /dev/null` leave a regular file as the system's /dev/null.
#pragma once

#include <string>
#include <vector>

namespace sonde::analyzers {

// What `path` names, not following a symbolic link.
enum class OutputKind { kNone, kRegular, kDirectory, kOther };
OutputKind output_kind(const std::string& path);

// "a character device", "a FIFO", "a symbolic link", ...: for messages about a kOther path.
std::string output_kind_name(const std::string& path);

// True where `path` is written through rather than replaced: it exists and is neither a
// regular file nor a directory (a device, FIFO or socket, or a symbolic link to anything).
inline bool written_through(const std::string& path) {
  return output_kind(path) == OutputKind::kOther;
}

// The file a regular output is written to before it is renamed over `path`: beside it (one
// file system), named for this process, and within NAME_MAX however long the output's name
// (`path` + ".sonde-tmp-<pid>" made names of 240-255 bytes, which the file system takes, fail
// as "File name too long").
std::string temp_beside(const std::string& path);

// Whether two paths name one file (links, hard links, `./x` followed).
bool same_file(const std::string& a, const std::string& b);

// Refuses (Error, exit 2) an output that is one of the command's inputs: written (or, through
// a link, emptied) before the input is read whole, a profile was lost to `sonde export p.db
// -o p.db` and to `view p.db --html p.db --force`.
void refuse_input_as_output(const std::vector<std::string>& inputs, const std::string& output);

// Refuses (Error, exit 2) an input given twice (as itself, `./x`, or a link to it): merge and
// scaling would count its ranks or its run twice.
void refuse_repeated_inputs(const std::vector<std::string>& inputs);

// Refuses (Error) an output that must become a SQLite file of sonde's own (a profile, a merged
// profile) where `path` names something else than a regular file: even with --force, it is
// never removed or replaced.
void require_regular_output(const std::string& path, const std::string& shown);

}  // namespace sonde::analyzers
