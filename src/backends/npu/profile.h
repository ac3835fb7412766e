// The Ascend devices the npu emulator can present, and the numbers the emulator, the tiling
// planner and the cost model take from them. Every number carries its source tag; the tags are
// listed in docs/backends/npu.md (they are those of shared/research/npu-anchors.md and
// npu-xpu-facts.md). A number without a primary source is marked `assumed` or `derived` there.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace opreg::npu {

struct Profile {
  const char* name;        // the SoC name as CANN spells it: "Ascend910B4"
  int ai_cores;            // cube cores (AIC)
  int vector_cores;        // vector cores (AIV): what a vector kernel's blocks run on
  std::uint64_t ub_bytes;  // Unified Buffer per vector core, as a kernel can use it
  std::uint64_t l2_bytes;
  std::uint64_t hbm_bytes;
  double clock_ghz;        // the core clock the cost model counts cycles in
  double hbm_gbps;         // aggregate HBM bandwidth, reads and writes together (10^9 B/s)
  bool hbm_gbps_verified;  // false: a marked parameter, not a vendor figure
  // Per-core DMA rates in bytes per cycle (CANN's platform ini, [AICoreMemoryRates]): a core
  // reading GM from HBM, reading it from L2, writing UB to GM (HBM) and writing into L2.
  double ddr_read_bpc;
  double l2_read_bpc;
  double ub_to_ddr_bpc;
  double l2_write_bpc;
  // Bank groups of the UB: 16 on A2/A3 (48 banks of 128 x 32 B, three to a group [S30]); 0 where
  // no source gives the structure (the cost model then charges no bank conflicts).
  int ub_bank_groups;
  // The rate a DMA row reaches from a GM address not 512-byte aligned, as a fraction of the
  // aligned rate: 0.7 on A2 (the page's largest difference [S31]), 1 where no source gives one.
  double gm_unaligned_rate;
  // Per-instruction vector costs (a start-up per instruction and cycles per repeat by
  // instruction, [S33]) on the A2/A3 profiles; false: one cycle a repeat, no start-up.
  bool instr_costs;
  // bf16 and int64 arithmetic on the vector unit: the 950PR (A5: vadd's types i8-i64, f16, bf16,
  // f32 [S33]); the A2/A3 vector unit has neither (bf16: Cast to float first; int64 runs on the
  // scalar unit).
  bool native_bf16_int64;
  const char* sources;  // one line: where each number comes from
};

// Ascend910B4 first: the default.
std::span<const Profile> profiles();
const Profile& default_profile();

// The cost model's constants that are not per profile (docs/backends/npu.md, "Cost model").
struct CostConstants {
  double launch_floor_us = 2.0;    // the smallest kernels take ~2 us on device [P1][P2]
  double block_overhead_us = 2.0;  // each further block a core runs: ~2 us [P3]
  double sync_all_us = 1.0;        // a SyncAll barrier across the launch's cores (assumed)
  // Each DMA instruction's set-up on its engine before its bytes move: transfers above 16 KB reach
  // the best bandwidth [S34]; assumed: a 16 KiB copy at the ini's 32 B a cycle (512 cycles) reaches
  // 90% of it, so 512 / 9 cycles.
  double dma_setup_cycles = 57.0;
  double l2_efficiency = 0.6;      // L2 rate reached by DMA of the ini's per-core rates (calibrated on [P1])
  double host_launch_us = 8.6;     // host-side enqueue of a launch [T3], reported apart, not in est_us
};
const CostConstants& cost_constants();

// The emulated device: a profile and the Unified Buffer size in force.
struct DeviceModel {
  const Profile* profile = nullptr;
  std::uint64_t ub_bytes = 0;
};

// Reads the profile from OPREG_NPU_PROFILE's value and the UB override from
// OPREG_NPU_UB_BYTES's value (each as registry/env.h reads them: nullopt when unset or blank).
// A profile is named as CANN does ("Ascend910B4") or without the prefix ("910B4"). Throws
// opreg::Error (invalid argument) naming the variable, the value and what is accepted.
DeviceModel select_device_model(const std::optional<std::string>& profile_name,
                                const std::optional<std::string>& ub_bytes);

// The accepted range of OPREG_NPU_UB_BYTES.
inline constexpr std::uint64_t kMinUbBytes = 4096;
inline constexpr std::uint64_t kMaxUbBytes = 1 << 20;

}  // namespace opreg::npu
