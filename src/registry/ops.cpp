// The process-wide table of op definitions: ids are dense so dispatch tables are arrays.
#include <mutex>

#include "opreg/registry.h"
#include "registry/names.h"
#include "registry/fail.h"
#include "registry/quote.h"

namespace opreg {
namespace {

struct OpTable {
  std::mutex mutex;
  std::vector<std::unique_ptr<detail::OpDef>> ops;
};

OpTable& op_table() {
  static OpTable* table = new OpTable();  // ops outlive every registry, including static ones
  return *table;
}

}  // namespace

const detail::OpDef& detail::define_op(std::unique_ptr<OpDef> op) {
  if (!names::is_op_name(op->name)) {
    fail(ErrorKind::invalid_argument, "op name {} is malformed: expected <name>.fwd or <name>.bwd, the name in lower "
         "case letters, digits and '_' (e.g. rms_norm.fwd)", quote(op->name));
  }
  OpTable& table = op_table();
  std::lock_guard lock(table.mutex);
  for (const auto& existing : table.ops) {
    if (existing->name == op->name) fail(ErrorKind::invalid_argument, "op '{}' is defined twice", op->name);
  }
  if (table.ops.size() == static_cast<std::size_t>(kMaxOps)) {
    fail(ErrorKind::unsupported, "cannot define op '{}': at most {} ops can be defined", op->name, kMaxOps);
  }
  op->id = static_cast<int>(table.ops.size());
  table.ops.push_back(std::move(op));
  return *table.ops.back();
}

std::vector<const detail::OpDef*> all_ops() {
  OpTable& table = op_table();
  std::lock_guard lock(table.mutex);
  std::vector<const detail::OpDef*> out;
  for (const auto& op : table.ops) out.push_back(op.get());
  return out;
}

void TensorList::too_many(const char* name) {
  fail(ErrorKind::internal, "an op lists more than {} tensors (at '{}')", kMaxOpTensors, name);
}

}  // namespace opreg
