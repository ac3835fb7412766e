// The xpu rope family's run (plan.h): the plan's kernel (kernels.cl) launched on the call's
// tensors, each located by the elements its strides reach, with the direction's sign of sin.
#include "backends/xpu/launch.h"

#include <cstddef>
#include <cstdint>

#include "backends/xpu/rope/plan.h"

namespace opreg::xpu::rope {
namespace {

// Elements from a tensor's first to one past its last: dims of `sizes` and `strides`, then a
// contiguous run of `last`; 0 when some size is 0.
template <std::size_t N>
std::uint64_t reach(const std::int64_t (&sizes)[N], const std::int64_t (&strides)[N], std::int64_t last) {
  std::int64_t end = last;
  for (std::size_t i = 0; i < N; ++i) {
    if (sizes[i] == 0) return 0;
    end += (sizes[i] - 1) * strides[i];
  }
  return last == 0 ? 0 : static_cast<std::uint64_t>(end);
}

// `data`'s memory as the kernel receives it; a tensor the call does not read (no elements) stands
// for nothing (the runtime's placeholder), wherever its pointer points.
DevicePointer at(const Launch& l, const void* data, std::uint64_t bytes, const char* what) {
  return l.at(bytes == 0 ? nullptr : data, bytes, what);
}

struct Side {
  DevicePointer in;
  DevicePointer out;
};

Side locate(const Launch& l, const Rope& d, const family::RopeSide& s, const char* in, const char* out) {
  const std::int64_t sizes[3] = {d.batch, s.heads, d.seq};
  const std::uint64_t bytes = elem_bytes(d.type);
  return {at(l, s.in, reach(sizes, s.in_stride, d.dim) * bytes, in),
          at(l, s.out, reach(sizes, s.out_stride, d.dim) * bytes, out)};
}

// A table's entries the call reads: its rows (position_ids' targets, or the (b, t) rows), each
// to pair D/2 - 1's entry.
DevicePointer locate_table(const Launch& l, const Rope& d, const void* table, const std::int64_t (&stride)[2],
                           const char* what) {
  const std::int64_t row = (d.dim / 2 - 1) * d.table_step + 1;
  std::uint64_t entries = 0;
  if (d.positions != nullptr) {
    entries = reach({d.table_rows}, {stride[1]}, row);
  } else {
    entries = reach({d.batch, d.seq}, stride, row);
  }
  return at(l, table, entries * elem_bytes(d.table_type), what);
}

cl_ulong u(std::int64_t v) { return static_cast<cl_ulong>(v); }

}  // namespace

void teams_run(const Rope& d, const Plan& planned, const KernelContext& ctx) {
  const Launch l(ctx);
  const Plan p = l.current(d, planned);
  if (p.positions == 0 || p.half == 0 || d.q.heads + d.k.heads == 0) return;
  const char* in_q = d.backward ? "tensor dq_out" : "tensor q";
  const char* in_k = d.backward ? "tensor dk_out" : "tensor k";
  const Side q = locate(l, d, d.q, in_q, d.backward ? "tensor dq" : "tensor q_out");
  const Side k = locate(l, d, d.k, in_k, d.backward ? "tensor dk" : "tensor k_out");
  const DevicePointer cos = locate_table(l, d, d.cos, d.cos_stride, "tensor cos");
  const DevicePointer sin = locate_table(l, d, d.sin, d.sin_stride, "tensor sin");
  const bool gathered = d.positions != nullptr;
  // Without position_ids the kernel reads none: cos stands in for the buffer argument.
  const DevicePointer positions =
      gathered
          ? l.at(d.positions, reach({d.batch, d.seq}, d.pos_stride, 1) * sizeof(std::int64_t), "tensor position_ids")
          : cos;
  const bool interleaved = d.pairing == family::Pairing::interleaved;
  l.rt.launch(l.queue, l.kernel(p.kernel), p.global, p.group,
              // q, then k: in, out, heads, the in strides and the out strides
              q.in, q.out, u(d.q.heads), u(d.q.in_stride[0]), u(d.q.in_stride[1]), u(d.q.in_stride[2]),
              u(d.q.out_stride[0]), u(d.q.out_stride[1]), u(d.q.out_stride[2]), k.in, k.out, u(d.k.heads),
              u(d.k.in_stride[0]), u(d.k.in_stride[1]), u(d.k.in_stride[2]), u(d.k.out_stride[0]), u(d.k.out_stride[1]),
              u(d.k.out_stride[2]),
              // the tables, then position_ids
              cos, sin, u(d.cos_stride[0]), u(d.cos_stride[1]), u(d.sin_stride[0]), u(d.sin_stride[1]), u(d.table_rows),
              u(d.table_step), positions, static_cast<cl_int>(gathered), u(d.pos_stride[0]), u(d.pos_stride[1]),
              // the walk: positions, pairs and the pairing, the team, the direction
              u(d.seq), static_cast<cl_ulong>(p.positions), static_cast<cl_ulong>(p.half),
              static_cast<cl_ulong>(interleaved ? 2 : 1), static_cast<cl_ulong>(interleaved ? 1 : p.half),
              static_cast<cl_uint>(p.team), static_cast<cl_float>(d.backward ? -1.0f : 1.0f));
}

}  // namespace opreg::xpu::rope
