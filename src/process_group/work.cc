#include "groupcoord/work.h"

namespace groupcoord {

// Out of line so that the vtable has a home.
Work::~Work() = default;

}  // namespace groupcoord
