// How the emulator finds a kernel by name and calls it with a launch's parameters. Each kernel
// source registers its kernels (RT_KERNEL in ramtrain.cuh); a launch copies the parameter values
// at enqueue time (the caller's memory may be gone when the stream runs it) into a tuple of the
// kernel's own parameter types, then calls the kernel once per thread.
#pragma once

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace emu {

// Calls the kernel for the current thread coordinates.
using ThreadBody = std::function<void()>;
// Copies a launch's parameters (cuLaunchKernel's void** kernelParams) into a ThreadBody.
using Binder = std::function<ThreadBody(void** params)>;

void register_kernel(const char* name, Binder binder, bool barriers);

template <typename... Args>
struct Registration {
  Registration(const char* name, void (*kernel)(Args...), bool barriers) {
    register_kernel(
        name,
        [kernel](void** params) -> ThreadBody {
          auto values = bind(params, std::index_sequence_for<Args...>{});
          return [kernel, values]() { std::apply(kernel, values); };
        },
        barriers);
  }

  template <size_t... I>
  static std::tuple<std::decay_t<Args>...> bind(void** params, std::index_sequence<I...>) {
    return std::tuple<std::decay_t<Args>...>(*static_cast<std::decay_t<Args>*>(params[I])...);
  }
};

}  // namespace emu
