#include "core_units.h"

namespace at {
double run_core_units(int seed) { return MEGATEST_CALL_ALL_UNITS(seed); }
}  // namespace at
