// The statements of a source file that span several lines, for `--lines` (frames.cpp): one run
// of `x = f(a,\n b)`, whose line events are 1, 2, 1, is one hit on each of its lines.
#pragma once

#include <string>
#include <unordered_map>

namespace sonde::python {

// Line -> the first line of its statement (or of a compound statement's header: `if (a and\n
// b):`, a decorated `def` and its signature), for the lines of those that span several lines.
using StatementStarts = std::unordered_map<int, int>;

// Parsed with CPython's own parser into its AST (compile's PyCF_ONLY_AST) and read through the
// nodes' attributes, all in C: no Python frame runs, so nothing of it shows in the profile of the
// program measured. Empty where the file cannot be read or parsed. Holds the GIL; leaves no
// exception set.
//
// `first_line`: a function's (its code's co_firstlineno, its first decorator's), whose block
// alone is parsed where it can be cut out of the file (the whole file's AST took about 10 ms per
// 1,000 lines, at the function's first timed call: 0.1 s on a 12,000-line file); the whole file
// where it cannot (module code, a block that does not parse alone), or with `first_line` 0.
StatementStarts read_statement_starts(const std::string& path, int first_line = 0);

}  // namespace sonde::python
