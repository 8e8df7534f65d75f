#include "process_group/gloo_errors.h"

#include <gloo/common/error.h>

#include <sstream>
#include <stdexcept>

#include "groupcoord/errors.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

// Gloo's text when a wait that timed out closed every connection of the context; the operations
// that fail with it did not run out of time themselves.
constexpr const char* kOtherTimeout = "Application timeout caused pair closure";

/// What went wrong, before it is turned into one of our exception types.
struct Classified {
  bool timeout = false;
  bool other_op_timed_out = false;  ///< Gloo closed the connections after another op's timeout
  bool caller_error = false;
  std::string what;
};

Classified classify(std::exception_ptr error) {
  Classified result;
  try {
    std::rethrow_exception(error);
  } catch (const std::invalid_argument& e) {
    result.caller_error = true;
    result.what = e.what();
  } catch (const TimeoutError& e) {
    result.timeout = true;  // the store's deadline during rendezvous
    result.what = e.what();
  } catch (const ::gloo::Exception& e) {  // IoException and the rest of Gloo's errors
    result.what = e.what();
    result.other_op_timed_out = result.what.find(kOtherTimeout) != std::string::npos;
    result.timeout = result.other_op_timed_out || is_gloo_timeout_message(result.what);
  } catch (const std::exception& e) {
    result.what = e.what();
  } catch (...) {
    result.what = "unknown exception";
  }
  return result;
}

}  // namespace

bool is_gloo_timeout_message(const std::string& what) {
  // UnboundBuffer::waitSend/waitRecv say "Timed out waiting Nms for send operation to complete";
  // the TCP pairs say "Connect timeout", "Read timeout", "Write timeout", "Send timeout"; the
  // rendezvous stores say "Wait timeout for key(s)".
  static const char* const kMarkers[] = {"Timed out",    "timed out",     "Connect timeout",
                                         "Read timeout", "Write timeout", "Send timeout",
                                         "Wait timeout"};
  for (const char* marker : kMarkers) {
    if (what.find(marker) != std::string::npos) return true;
  }
  return false;
}

std::exception_ptr map_gloo_error(std::exception_ptr error, GroupHealth& health,
                                  const std::string& op, std::chrono::milliseconds timeout) {
  const Classified c = classify(error);
  if (c.caller_error) return error;

  std::ostringstream message;
  message << health.label() << ": " << op;
  if (c.other_op_timed_out) {
    message << " aborted: another operation of the group timed out (limit " << timeout.count()
            << " ms) and Gloo closed the group's connections";
  } else if (c.timeout) {
    message << " timed out after " << timeout.count() << " ms (a peer did not join or stalled)";
  } else {
    message << " failed (a peer died, left or misbehaved)";
  }
  message << ": " << c.what;
  health.mark_broken(message.str());
  GC_LOG(Debug, message.str());
  if (c.timeout) return std::make_exception_ptr(TimeoutError(message.str()));
  return std::make_exception_ptr(DistributedError(message.str()));
}

}  // namespace groupcoord
