// Every op's argument check, and the variant choice after it, on tensors of random rank, extents,
// strides, dtypes, devices and placement (views of one buffer, so overlaps happen), with random
// scalars. Checks and supports() predicates read only metadata: nothing here touches tensor data.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_support.h"
#include "ops/manifest.h"
#include "opreg/ops.h"

namespace {

using namespace opreg;

alignas(64) unsigned char g_buffer[1 << 16];

Tensor random_tensor(FuzzedDataProvider& in, const std::vector<Device>& devices) {
  if (in.ConsumeIntegralInRange(0, 9) == 0) return Tensor();  // undefined (an optional left out)
  const int rank = in.ConsumeIntegralInRange(0, 5);
  std::array<std::int64_t, 8> dims{};
  std::array<std::int64_t, 8> strides{};
  for (int d = 0; d < rank; ++d) {
    // Mostly small extents, sometimes huge ones (the overflow rules).
    dims[static_cast<std::size_t>(d)] = in.ConsumeIntegralInRange(0, 15) == 0
                                            ? in.ConsumeIntegral<std::int64_t>() & INT64_MAX
                                            : in.ConsumeIntegralInRange<std::int64_t>(0, 9);
    strides[static_cast<std::size_t>(d)] = in.ConsumeIntegralInRange(0, 7) == 0
                                               ? in.ConsumeIntegral<std::int64_t>()
                                               : in.ConsumeIntegralInRange<std::int64_t>(-12, 40);
  }
  const auto dtype = static_cast<DType>(in.ConsumeIntegralInRange(0, kNumDTypes - 1));
  const Device device = devices[in.ConsumeIntegralInRange<std::size_t>(0, devices.size() - 1)];
  const bool contiguous = in.ConsumeBool();
  const std::size_t offset = in.ConsumeIntegralInRange<std::size_t>(0, sizeof(g_buffer) / 2);
  const std::span<const std::int64_t> st(strides.data(), contiguous ? 0 : static_cast<std::size_t>(rank));
  Tensor t;
  fuzz::expect_only_opreg_errors([&] {
    t = Tensor::wrap(static_cast<void*>(g_buffer + offset), Shape(std::span<const std::int64_t>(dims.data(),
                                                                                                static_cast<std::size_t>(rank))),
                     dtype, device, st);
  });
  return t;
}

template <class Args>
void check_op(FuzzedDataProvider& in, const Op<Args>& op, const std::vector<Tensor>& pool) {
  Args args{};
  TensorList list;
  op.def().tensors(op.def(), &args, list);
  for (int i = 0; i < list.size(); ++i) {
    *list[i].tensor = pool[in.ConsumeIntegralInRange<std::size_t>(0, pool.size() - 1)];
  }
  if constexpr (requires { args.eps; }) args.eps = in.ConsumeFloatingPoint<double>();
  if constexpr (requires { args.offset; }) args.offset = in.ConsumeBool() ? 0.0 : in.ConsumeFloatingPoint<double>();
  if constexpr (requires { args.casting; }) args.casting = static_cast<Casting>(in.ConsumeIntegralInRange(0, 3));
  if constexpr (requires { args.rounding; }) args.rounding = static_cast<Rounding>(in.ConsumeIntegralInRange(0, 2));
  if constexpr (requires { args.num_groups; }) args.num_groups = in.ConsumeIntegral<std::int64_t>();
  if constexpr (requires { args.style; }) args.style = static_cast<RopeStyle>(in.ConsumeIntegralInRange(0, 2));
  Registry& reg = default_registry();
  fuzz::expect_only_opreg_errors([&] {
    std::string why;
    (void)reg.choose(op, args, &why);  // the op's check, then every variant's supports()
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Registry& reg = default_registry();
  std::vector<Device> devices;
  for (const auto& b : reg.backends()) {
    for (std::size_t i = 0; i < b.devices.size(); ++i) devices.push_back({b.id, static_cast<std::int16_t>(i)});
  }
  devices.push_back({kCpuBackendId, 5});  // a device that does not exist
  std::vector<Tensor> pool;
  const int tensors = in.ConsumeIntegralInRange(1, 8);
  for (int i = 0; i < tensors; ++i) pool.push_back(random_tensor(in, devices));
  manifest::visit_op(in.ConsumeIntegralInRange(0, manifest::kOpCount - 1),
                     [&](auto entry) { check_op(in, entry.op(), pool); });
  return 0;
}
