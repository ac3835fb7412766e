// The device API an npu kernel includes, as an Ascend C kernel includes CANN's kernel_operator.h:
// GlobalTensor / LocalTensor, TPipe / TQue / TBuf, DataCopy / DataCopyPad, the vector
// instructions, SyncAll and the block index. See docs/backends/npu.md for what is emulated.
#pragma once

#include "backends/npu/ascend/data_copy.h"
#include "backends/npu/ascend/pipe.h"
#include "backends/npu/ascend/tensor.h"
#include "backends/npu/ascend/types.h"
#include "backends/npu/ascend/vector.h"
#include "backends/npu/ascend/vector_repeat.h"
