// A small op for registry tests: y = alpha * x (+ bias), f32, any shape. Its cpu kernel is
// real so that fallback through host copies can be checked on data.
#pragma once

#include <gmock/gmock.h>

#include "opreg/registry.h"
#include "registry/fail.h"

namespace opreg::testing {

struct ScaleArgs {
  Tensor x;
  Tensor y;
  Tensor bias;  // optional, same shape as x
  float alpha = 1.0F;
};

inline void scale_check(const ScaleArgs& a) {
  if (!a.x.defined() || !a.y.defined()) fail(ErrorKind::invalid_argument, "test_scale.fwd: x and y are required");
  if (!(a.x.shape() == a.y.shape())) {
    fail(ErrorKind::invalid_argument, "test_scale.fwd: y has shape {} but x has {}", a.y.shape().str(),
         a.x.shape().str());
  }
  if (a.x.dtype() != DType::f32 || a.y.dtype() != DType::f32) {
    fail(ErrorKind::invalid_argument, "test_scale.fwd: dtype {} (accepted: f32)", to_string(a.x.dtype()));
  }
}

inline void scale_tensors(ScaleArgs& a, TensorList& list) {
  list.add("x", a.x, Role::in);
  list.add("y", a.y, Role::out);
  list.add("bias", a.bias, Role::in);
}

inline const Op<ScaleArgs>& scale_op() {
  static const Op<ScaleArgs> op(OpSpec<ScaleArgs>{"test_scale.fwd", &scale_check, &scale_tensors, nullptr});
  return op;
}

// A real host kernel for the op (contiguous f32).
inline void scale_on_host(const ScaleArgs& a, const KernelContext&) {
  const float* x = a.x.data_as<float>();
  const float* b = a.bias.defined() ? a.bias.data_as<float>() : nullptr;
  float* y = a.y.data_as<float>();
  for (std::int64_t i = 0; i < a.x.numel(); ++i) y[i] = a.alpha * x[i] + (b != nullptr ? b[i] : 0.0F);
}

// A kernel and predicate that GoogleMock stands behind.
class MockKernel {
 public:
  MOCK_METHOD(void, Run, (const ScaleArgs& args, const KernelContext& ctx));
  MOCK_METHOD(Verdict, Supports, (const ScaleArgs& args, const DeviceProps& props));
};

// A variant whose kernel (and, when asked, whose supports predicate) is the mock.
inline VariantSpec<ScaleArgs> mock_variant(const std::string& backend, const std::string& impl, int priority,
                                           MockKernel& mock, bool with_supports = false) {
  VariantSpec<ScaleArgs> spec;
  spec.backend = backend;
  spec.impl = impl;
  spec.priority = priority;
  spec.run = [&mock](const ScaleArgs& a, const KernelContext& c) { mock.Run(a, c); };
  if (with_supports) {
    spec.supports = [&mock](const ScaleArgs& a, const DeviceProps& p) { return mock.Supports(a, p); };
  }
  spec.user = &mock;
  return spec;
}

// Sets environment variables for one scope and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      const char* old = std::getenv(k);
      saved_.push_back({k, old != nullptr, old != nullptr ? old : ""});
      if (v != nullptr) {
        setenv(k, v, 1);
      } else {
        unsetenv(k);
      }
    }
  }
  ~ScopedEnv() {
    for (const auto& s : saved_) {
      if (s.was_set) {
        setenv(s.name.c_str(), s.value.c_str(), 1);
      } else {
        unsetenv(s.name.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  struct Saved {
    std::string name;
    bool was_set;
    std::string value;
  };
  std::vector<Saved> saved_;
};

// Every variable the registry reads, unset for one scope (restored after).
class CleanRegistryEnv : public ScopedEnv {
 public:
  CleanRegistryEnv()
      : ScopedEnv{{"OPREG_DEVICE", nullptr},   {"OPREG_BACKEND_ORDER", nullptr}, {"OPREG_DISABLE", nullptr},
                  {"OPREG_FORCE_VARIANT", nullptr}, {"OPREG_FALLBACK", nullptr},   {"OPREG_VERBOSE", nullptr},
                  {"OPREG_NUM_THREADS", nullptr}} {}
};

}  // namespace opreg::testing
