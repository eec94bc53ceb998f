#include "statements.hpp"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fstream>
#include <iterator>
#include <string_view>
#include <vector>

namespace sonde::python {
namespace {

// An int attribute of an AST node (lineno, end_lineno), 0 where it has none.
int line_of(PyObject* node, const char* attribute) {
  PyObject* v = PyObject_GetAttrString(node, attribute);
  long line = v != nullptr && PyLong_Check(v) ? PyLong_AsLong(v) : 0;
  Py_XDECREF(v);
  PyErr_Clear();
  return line > 0 && line < (1 << 30) ? int(line) : 0;
}

// A list attribute of a node (body, orelse, handlers, ...), a new reference, or nullptr.
PyObject* list_of(PyObject* node, const char* attribute) {
  PyObject* v = PyObject_GetAttrString(node, attribute);
  if (v != nullptr && PyList_Check(v)) return v;
  Py_XDECREF(v);
  PyErr_Clear();
  return nullptr;
}

// One line's statements get no entry: a line missing from the table is its own statement.
void add(StatementStarts& starts, int first, int last) {
  for (int line = first; first > 0 && last > first && line <= last; ++line)
    starts.emplace(line, first);
}

void walk(PyObject* statements, StatementStarts& starts);

// A statement, an except clause or a match case: a simple statement spans its lines, a compound
// one its header (its first line to the line before its body).
void visit(PyObject* node, StatementStarts& starts) {
  int first = line_of(node, "lineno");
  if (PyObject* pattern = PyObject_GetAttrString(node, "pattern")) {  // match_case
    first = line_of(pattern, "lineno");
    Py_DECREF(pattern);
  }
  PyErr_Clear();
  if (PyObject* decorators = list_of(node, "decorator_list")) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(decorators); ++i) {
      int line = line_of(PyList_GET_ITEM(decorators, i), "lineno");
      if (line > 0 && line < first) first = line;
    }
    Py_DECREF(decorators);
  }
  PyObject* body = list_of(node, "body");
  PyObject* cases = list_of(node, "cases");  // match: its header ends before its first case
  PyObject* opens = cases != nullptr && PyList_GET_SIZE(cases) > 0 ? PyList_GET_ITEM(cases, 0)
                    : body != nullptr && PyList_GET_SIZE(body) > 0 ? PyList_GET_ITEM(body, 0)
                                                                   : nullptr;
  if (opens != nullptr) {
    int inner = line_of(opens, "lineno");
    if (PyObject* pattern = PyObject_GetAttrString(opens, "pattern")) {
      inner = line_of(pattern, "lineno");
      Py_DECREF(pattern);
    }
    PyErr_Clear();
    add(starts, first, inner - 1);
  } else {
    add(starts, first, line_of(node, "end_lineno"));
  }
  Py_XDECREF(body);
  Py_XDECREF(cases);
  for (const char* field : {"body", "orelse", "finalbody", "handlers", "cases"}) {
    if (PyObject* inner = list_of(node, field)) {
      walk(inner, starts);
      Py_DECREF(inner);
    }
  }
}

void walk(PyObject* statements, StatementStarts& starts) {
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(statements); ++i)
    visit(PyList_GET_ITEM(statements, i), starts);
}

// `source`'s statements, its lines counted from `offset` + 1; false where it does not parse.
bool parse_into(const std::string& source, const std::string& path, int offset,
                StatementStarts& starts) {
  PyCompilerFlags flags = _PyCompilerFlags_INIT;
  flags.cf_flags = PyCF_ONLY_AST;
  PyObject* module =
      Py_CompileStringExFlags(source.c_str(), path.c_str(), Py_file_input, &flags, -1);
  if (module == nullptr) return false;
  StatementStarts found;
  if (PyObject* body = list_of(module, "body")) {
    walk(body, found);
    Py_DECREF(body);
  }
  Py_DECREF(module);
  for (const auto& [line, first] : found) starts.emplace(line + offset, first + offset);
  return true;
}

std::size_t indent_of(std::string_view line) { return line.find_first_not_of(" \t"); }

// The line's code after its indentation ("" for a blank line).
std::string_view code_of(std::string_view line) {
  std::size_t i = indent_of(line);
  return i == std::string_view::npos ? std::string_view{} : line.substr(i);
}

bool is_def(std::string_view line) {
  std::string_view s = code_of(line);
  return s.starts_with("def ") || s.starts_with("async def ");
}

// The block of the function whose first line is `first_line` (1-based), dedented, with the
// line before it as `offset`; empty where it cannot be cut out: its first line is no `def` or
// decorator (module code, a lambda, a class body). The block ends before the first line after
// its `def` that holds code at the `def`'s indentation or less; blank and comment lines are
// skipped, and kept empty. A line that ends it inside a string or brackets, or a header over
// lines indented less, leaves a block that does not parse: the whole file is read then.
std::string function_block(const std::vector<std::string_view>& lines, int first_line,
                           int& offset) {
  std::size_t start = std::size_t(first_line - 1);
  if (first_line <= 0 || start >= lines.size()) return {};
  if (!is_def(lines[start]) && !code_of(lines[start]).starts_with("@")) return {};
  std::size_t indent = indent_of(lines[start]);
  std::string_view prefix = lines[start].substr(0, indent);
  std::size_t def = start;  // past the decorators
  while (def < lines.size() && !is_def(lines[def])) ++def;
  if (def == lines.size()) return {};
  std::string block;
  for (std::size_t i = start; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    std::size_t at = indent_of(line);
    bool code = at != std::string_view::npos && line[at] != '#';
    if (i > def && code && at <= indent) break;
    if (!code) {
      block += '\n';
      continue;
    }
    if (!line.starts_with(prefix)) return {};  // tabs against spaces: the whole file decides
    block.append(line.substr(indent)) += '\n';
  }
  offset = first_line - 1;
  return block;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

}  // namespace

StatementStarts read_statement_starts(const std::string& path, int first_line) {
  StatementStarts starts;
  std::ifstream in(path, std::ios::binary);
  if (!in) return starts;
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (source.find('\0') != std::string::npos) return starts;  // not Python source
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  int offset = 0;
  std::string block = function_block(split_lines(source), first_line, offset);
  if (block.empty() || !parse_into(block, path, offset, starts)) {
    PyErr_Clear();
    starts.clear();
    parse_into(source, path, 0, starts);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  return starts;
}

}  // namespace sonde::python
