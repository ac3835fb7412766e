// The registration function of each backend folder. Only builtin.cpp (and tests, which may
// build registries of their own) call them.
#pragma once

namespace opreg {
class Registry;

void register_cpu(Registry& registry);
void register_cuda_like(Registry& registry);
void register_npu(Registry& registry);
void register_xpu(Registry& registry);

// Calls the registration function of every backend CMake enabled, cpu first.
void register_builtin_backends(Registry& registry);
}  // namespace opreg
