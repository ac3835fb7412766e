// A user-defined backend and op registered at run time into the process-wide registry.
// Built and run as a test; only the public headers are used.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "opreg/registry.h"

namespace {

// A device whose memory is host memory (an accelerator would override the memory services).
class MyBackend final : public opreg::HostMemoryBackend {
 public:
  std::string name() const override { return "mine"; }
  int inference_priority() const override { return 350; }
  opreg::FallbackPolicy default_fallback() const override { return opreg::FallbackPolicy::warn; }
  opreg::Availability probe() override { return {true, 1, "example device"}; }
  opreg::DeviceProps properties(int) const override {
    opreg::DeviceProps props;
    props.name = "example device";
    props.compute_units = 1;
    return props;
  }
};

// y = a * x + y
struct AxpyArgs {
  opreg::Tensor x;
  opreg::Tensor y;
  float a = 1.0F;
};

void axpy_check(const AxpyArgs& args) {
  if (!(args.x.shape() == args.y.shape())) {
    throw opreg::Error(opreg::ErrorKind::invalid_argument,
                       "axpy.fwd: y has shape " + args.y.shape().str() + " but x has " + args.x.shape().str());
  }
}

void axpy_tensors(AxpyArgs& args, opreg::TensorList& list) {
  list.add("x", args.x, opreg::Role::in);
  list.add("y", args.y, opreg::Role::inout);
}

const opreg::Op<AxpyArgs> axpy_op(opreg::OpSpec<AxpyArgs>{"axpy.fwd", &axpy_check, &axpy_tensors, nullptr});

}  // namespace

int main() {
  opreg::Registry& reg = opreg::default_registry();
  opreg::Registration backend = reg.add_backend(std::make_shared<MyBackend>());
  opreg::Registration variant = reg.add_variant(
      axpy_op, opreg::VariantSpec<AxpyArgs>{
                   .backend = "mine",
                   .impl = "simple",
                   .priority = 10,
                   .supports = [](const AxpyArgs& args, const opreg::DeviceProps&) {
                     return args.x.dtype() == opreg::DType::f32 ? opreg::Verdict::accept()
                                                                 : opreg::Verdict::reject("f32 only");
                   },
                   .run = [](const AxpyArgs& args, const opreg::KernelContext&) {
                     const float* x = args.x.data_as<float>();
                     float* y = args.y.data_as<float>();
                     for (std::int64_t i = 0; i < args.x.numel(); ++i) y[i] += args.a * x[i];
                   },
                   .tunables = {{"unroll", "1"}}});

  const opreg::Device device = reg.parse_device("mine");
  AxpyArgs args;
  args.x = opreg::Tensor::empty({2, 3}, opreg::DType::f32, device);
  args.y = opreg::Tensor::empty({2, 3}, opreg::DType::f32, device);
  args.x.fill(2.0);
  args.y.fill(1.0);
  args.a = 3.0F;
  const opreg::DispatchResult result = reg.call(axpy_op, args);

  std::vector<float> y(6);
  opreg::Tensor::wrap(y.data(), {2, 3}, opreg::DType::f32).copy_from(args.y);
  std::printf("ran %s on %s: y[0] = %g (expected 7)\n", result.variant->name.c_str(),
              reg.device_name(device).c_str(), static_cast<double>(y[0]));
  const opreg::Inference inferred = reg.infer_device();
  std::printf("inference now picks %s (%s)\n", reg.device_name(inferred.device).c_str(), inferred.why.c_str());
  // Named in OPREG_DEVICE (before it registered), the custom backend is what inference returns.
  const bool named = std::getenv("OPREG_DEVICE") != nullptr;
  return y[0] == 7.0F && (!named || inferred.device == device) ? 0 : 1;
}
