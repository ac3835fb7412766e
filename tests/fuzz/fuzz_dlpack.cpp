// The DLPack importer on arbitrary DLTensor fields (dtype, device, rank, shape, strides, byte
// offset): it must make a view or throw opreg::Error, and the producer's deleter must run
// exactly once on success and never on refusal.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fuzz_support.h"
#include "opreg/dlpack.h"
#include "opreg/registry.h"

namespace {
alignas(256) unsigned char g_buffer[1 << 12];
int g_deleted = 0;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace opreg;
  FuzzedDataProvider in(data, size);
  std::array<std::int64_t, 12> shape{};
  std::array<std::int64_t, 12> strides{};
  for (auto& s : shape) s = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int64_t>(0, 9) : in.ConsumeIntegral<std::int64_t>();
  for (auto& s : strides) s = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int64_t>(-9, 99) : in.ConsumeIntegral<std::int64_t>();
  DLManagedTensor m{};
  m.dl_tensor.data = in.ConsumeBool() ? nullptr : g_buffer;
  // Any 32-bit device type, as a C producer could send (not only the header's enumerators).
  const std::int32_t type = in.ConsumeIntegralInRange(0, 20);
  std::memcpy(&m.dl_tensor.device.device_type, &type, sizeof type);
  m.dl_tensor.device.device_id = in.ConsumeIntegral<std::int32_t>();
  m.dl_tensor.ndim = in.ConsumeBool() ? in.ConsumeIntegralInRange(0, 4) : in.ConsumeIntegral<std::int32_t>();
  m.dl_tensor.dtype = {in.ConsumeIntegral<std::uint8_t>(), in.ConsumeIntegral<std::uint8_t>(),
                       in.ConsumeIntegral<std::uint16_t>()};
  m.dl_tensor.shape = in.ConsumeBool() ? shape.data() : nullptr;
  m.dl_tensor.strides = in.ConsumeBool() ? strides.data() : nullptr;
  // Mostly inside the buffer; sometimes anything (past the address space's end is refused). Only
  // metadata is read below, so a view of memory that is not there is harmless.
  m.dl_tensor.byte_offset =
      in.ConsumeIntegralInRange(0, 7) == 0 ? in.ConsumeIntegral<std::uint64_t>() : in.ConsumeIntegralInRange<std::uint64_t>(0, 64);
  if (m.dl_tensor.ndim > 12) m.dl_tensor.shape = m.dl_tensor.strides = nullptr;  // the producer's own arrays are short
  m.deleter = [](DLManagedTensor*) { ++g_deleted; };
  const int before = g_deleted;
  bool imported = false;
  fuzz::expect_only_opreg_errors([&] {
    Tensor t = from_dlpack(&m, default_registry());
    imported = true;
    (void)t.numel();
  });
  if (g_deleted != before + (imported ? 1 : 0)) std::abort();  // a deleter run twice, or not at all
  return 0;
}
