#include "common/version.h"

namespace sketchps {

const char* Version() { return SKETCHPS_VERSION_STRING; }

}  // namespace sketchps
