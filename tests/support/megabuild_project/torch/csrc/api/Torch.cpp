#include <c10/Core.h>
#include "core_units.h"

namespace torch {
double self_test() { return at::run_core_units(1); }
}  // namespace torch
