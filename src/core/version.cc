// groupcoord::version(): the version this library was built as (groupcoord/version.h).
#include "groupcoord/version.h"

namespace groupcoord {

const char* version() { return GROUPCOORD_VERSION_STRING; }

}  // namespace groupcoord
