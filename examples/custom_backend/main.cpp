// Registers the toy accelerator into the process-wide registry at run time and runs rms_norm
// forward and backward on the device inference picks: with OPREG_DEVICE=toy, the toy.
//
//   OPREG_DEVICE=toy example_custom_backend
#include <cmath>
#include <cstdio>
#include <vector>

#include "opreg/ops.h"
#include "toy_backend.h"

int main() {
  try {
    opreg::Registry& registry = opreg::default_registry();
    const std::vector<opreg::Registration> toy = toy::register_toy(registry);

    const opreg::Inference inferred = registry.infer_device();
    std::printf("device: %s (%s)\n", registry.device_label(inferred.device).c_str(), inferred.why.c_str());

    // x = 2 everywhere: rstd = 1 / sqrt(4 + eps), y = x * rstd * w = w.
    const opreg::Device device = inferred.device;
    opreg::RmsNormFwdArgs fwd;
    fwd.x = opreg::Tensor::empty({3, 5}, opreg::DType::f32, device);
    fwd.weight = opreg::Tensor::empty({5}, opreg::DType::f32, device);
    fwd.y = opreg::Tensor::empty({3, 5}, opreg::DType::f32, device);
    fwd.rstd = opreg::Tensor::empty({3}, opreg::DType::f32, device);
    fwd.x.fill(2.0);
    fwd.weight.fill(0.5);
    const opreg::DispatchResult ran = opreg::rms_norm_fwd(fwd);
    std::vector<float> y(15);
    opreg::Tensor::wrap(y.data(), {3, 5}, opreg::DType::f32).copy_from(fwd.y);

    const opreg::NormGrads grads = opreg::rms_norm_backward(fwd.x, fwd.x, fwd.weight, fwd.rstd);
    std::printf("rms_norm.fwd ran %s%s: y[0] = %g (expected 0.5)\n", ran.variant->name.c_str(),
                ran.fell_back ? " (fallback)" : "", static_cast<double>(y[0]));
    std::printf("rms_norm.bwd: dx on %s, dweight on %s\n", registry.device_name(grads.dx.device()).c_str(),
                registry.device_name(grads.dweight.device()).c_str());
    return std::fabs(y[0] - 0.5F) < 1e-6F ? 0 : 1;
  } catch (const opreg::Error& e) {
    std::fprintf(stderr, "example_custom_backend: %s\n", e.what());
    return 2;
  }
}
