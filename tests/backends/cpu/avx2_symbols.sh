#!/usr/bin/env bash
# The AVX2 kernel objects must define no symbol another translation unit could also define (an
# inline function or template instantiation outside opreg::cpu::avx2): the linker would keep one
# copy, and the AVX2 one could then run on a CPU without AVX2 (src/backends/cpu/abi.h).
# usage: avx2_symbols.sh OBJECT...   (the objects of opreg_cpu_kernels; *_avx2 ones are checked)
set -euo pipefail
status=0
checked=0
for obj in "$@"; do
  case $(basename "$obj") in *_avx2.cpp.o | *_avx2.o) ;; *) continue ;; esac
  checked=$((checked + 1))
  # Defined, externally visible (global or weak) symbols; names of opreg::cpu::avx2 (and of
  # what is local to its functions) mangle as _ZN5opreg3cpu4avx2..., _ZZN..., _ZNK....
  bad=$(nm --defined-only --extern-only "$obj" | awk '{ print $3 }' |
    grep -Ev '^_Z+N?K?5opreg3cpu4avx2' |
    grep -Ev '^_ZT[IS]' | c++filt || true)  # typeinfo (UBSan's function checks emit it) is data, no code
  if [[ -n $bad ]]; then
    echo "$obj defines symbols outside opreg::cpu::avx2:"
    echo "$bad" | head -20
    status=1
  fi
done
if [[ $checked -eq 0 ]]; then
  echo "no *_avx2 objects among the arguments" >&2
  exit 1
fi
echo "checked $checked AVX2 objects"
exit $status
