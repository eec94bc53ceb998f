// sonde.region(): user regions from Python (regions.cpp).
#pragma once

#include <Python.h>

namespace sonde::python {

// Adds the Region type to the extension module; false with a Python exception set on failure.
bool add_region_types(PyObject* module);

}  // namespace sonde::python
