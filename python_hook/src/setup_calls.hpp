// torch.distributed's set-up calls (init_process_group, new_group) wrapped by a C callable, so
// that no frame of sonde's own package stands between the program's frame and the set-up frame
// in a profile (a Python wrapper was one: _torch.py's setup_call, in every DDP profile).
#pragma once

#include <Python.h>

namespace sonde::python {

// Adds setup_call(name, function, after) to the extension module: a callable that runs
// `function` inside one set-up frame named `name` (bytes, kept), and `after` (or None) with no
// arguments once it returned, still inside it (nothing beneath a set-up frame is recorded, so
// neither is what `after` calls). False with a Python exception set on failure.
bool add_setup_call(PyObject* module);

}  // namespace sonde::python
