// Locked: the one registration point for every kernel binding of the `cuda_extension` module.
//
// A kernel's binding file (kernels/<name>_binding.cpp, or kernels/<name>.cpp on the CPU device)
// includes this header as "../binding_registry.h" and registers a function that adds its
// Python-visible functions to the module:
//
//     static void register_axpby(pybind11::module& m) { m.def("axpby", &axpby_forward); }
//     REGISTER_BINDING(axpby, register_axpby);
//
// binding.cpp then builds the module from every registration. Registrations run during static
// initialization of the shared library, before Python calls the module init function.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

class BindingRegistry {
 public:
  using RegisterFn = void (*)(pybind11::module&);

  static BindingRegistry& instance() {
    // A function-local static is constructed on first use, so registrations from any
    // translation unit are safe regardless of static initialization order.
    static BindingRegistry registry;
    return registry;
  }

  void add(const char* name, RegisterFn fn) { entries_.emplace_back(name, fn); }

  void apply(pybind11::module& m) const {
    for (const auto& entry : entries_) entry.second(m);
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : entries_) out.push_back(entry.first);
    return out;
  }

 private:
  std::vector<std::pair<std::string, RegisterFn>> entries_;
};

struct BindingRegistrar {
  BindingRegistrar(const char* name, BindingRegistry::RegisterFn fn) {
    BindingRegistry::instance().add(name, fn);
  }
};

#define REGISTER_BINDING(name, register_fn) \
  static BindingRegistrar binding_registrar_##name(#name, register_fn)
