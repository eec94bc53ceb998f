#include "statements.hpp"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fstream>
#include <iterator>

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

}  // namespace

StatementStarts read_statement_starts(const std::string& path) {
  StatementStarts starts;
  std::ifstream in(path, std::ios::binary);
  if (!in) return starts;
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (source.find('\0') != std::string::npos) return starts;  // not Python source
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyCompilerFlags flags = _PyCompilerFlags_INIT;
  flags.cf_flags = PyCF_ONLY_AST;
  if (PyObject* module =
          Py_CompileStringExFlags(source.c_str(), path.c_str(), Py_file_input, &flags, -1)) {
    if (PyObject* body = list_of(module, "body")) {
      walk(body, starts);
      Py_DECREF(body);
    }
    Py_DECREF(module);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  return starts;
}

}  // namespace sonde::python
