// Locked: defines the `cuda_extension` module from every REGISTER_BINDING in kernels/.
// It includes only pybind11 (no torch headers), so it compiles quickly and is built once.
#include "binding_registry.h"

PYBIND11_MODULE(cuda_extension, m) {
  m.doc() = "Custom kernels registered through binding_registry.h";
  BindingRegistry::instance().apply(m);
}
