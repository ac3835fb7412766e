#!/usr/bin/env bash
# The aarch64 build (`make aarch64`) registers no avx2 variant: every op direction's cpu list is
# its generic variant, then the reference, and the cpu device runs at the generic level. The
# program runs under the given emulator (qemu-aarch64 -L /usr/aarch64-linux-gnu on an x86 host).
# usage: tests/aarch64/variants.sh [EMULATOR ARGS...] AARCH64_BUILD_OPREG
set -euo pipefail
if (($# < 1)); then
  echo "usage: $0 [EMULATOR ARGS...] AARCH64_BUILD_OPREG" >&2
  exit 2
fi
# Listings are captured before grep reads them (pipefail: a writer killed by SIGPIPE would fail).
ops=$("$@" ops)
devices=$("$@" devices)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

op_names=$(grep -E '^[a-z_]+\.(fwd|bwd)$' <<<"$ops" || true)
cpu=$(sed -n 's/^ *\(cpu\.[^ ]*\) .*/\1/p' <<<"$ops")
[[ -n "$op_names" ]] || fail "'opreg ops' lists no op:"$'\n'"$ops"
others=$(grep -Ev '\.(generic|ref)$' <<<"$cpu" || true)
[[ -z "$others" ]] || fail "cpu variants other than generic and ref are registered:"$'\n'"$others"
for op in $op_names; do
  grep -qx "cpu\.$op\.generic" <<<"$cpu" || fail "no cpu.$op.generic"
done
grep -Eq '^ +cpu .*isa=generic host_isa=generic' <<<"$devices" || fail "the cpu device is not at the generic level:"$'\n'"$devices"
run=$("$@" run rms_norm.fwd --shape 64x1000)
grep -q 'variant=cpu\.rms_norm\.fwd\.generic .*status=pass' <<<"$run" || fail "opreg run: $run"
echo "aarch64: $(wc -l <<<"$op_names") op directions, cpu variants: $(grep -c '\.generic$' <<<"$cpu") generic," \
  "$(grep -c '\.ref$' <<<"$cpu") ref, no other; the cpu device at isa=generic"
