// A consumer of the installed opreg: wraps its own buffers, runs rms_norm on the default device
// (inference picks it; OPREG_DEVICE overrides) and prints what ran and a few values.
#include <opreg/ops.h>
#include <opreg/version.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  constexpr int kRows = 4;
  constexpr int kHidden = 8;
  std::vector<float> x(kRows * kHidden);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f + 0.25f;
  const std::vector<float> w(kHidden, 2.0f);
  std::vector<float> y(x.size());
  std::vector<float> rstd(kRows);

  try {
    opreg::Registry& reg = opreg::default_registry();
    const opreg::Device device = reg.infer_device().device;
    // The buffers live on the host: run on the cpu unless the default device is the cpu too
    // (device memory would need Tensor::empty + copy_from on that device).
    const opreg::DispatchResult r = opreg::rms_norm_fwd({.x = opreg::Tensor::wrap(x.data(), {kRows, kHidden}),
                                                        .weight = opreg::Tensor::wrap(w.data(), {kHidden}),
                                                        .y = opreg::Tensor::wrap(y.data(), {kRows, kHidden}),
                                                        .rstd = opreg::Tensor::wrap(rstd.data(), {kRows})});
    // Row 0 by hand: y = x * rstd * w.
    double squares = 0;
    for (int j = 0; j < kHidden; ++j) squares += static_cast<double>(x[j]) * x[j];
    const double want = x[0] / std::sqrt(squares / kHidden + 1e-6) * w[0];
    std::printf("opreg %s (compiled against %s); default device %s; ran %s; y[0]=%.6f (expected %.6f)\n",
                opreg::library_version(), OPREG_VERSION, reg.device_name(device).c_str(), r.variant->name.c_str(),
                static_cast<double>(y[0]), want);
    return std::fabs(y[0] - want) <= 1e-5 * std::fabs(want) + 1e-6 ? 0 : 1;
  } catch (const opreg::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 2;
  }
}
