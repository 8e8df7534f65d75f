// Readers of a ring whose writer is outside the reader's group (vLLM's external writer): the
// attachment step shared by MessageQueue::create_from_handle() and the external path of
// create_from_process_group(), and the rule that removes the segment's name once every reader
// of the handle has attached.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "groupcoord/message_queue.h"
#include "shm/ring_buffer.h"

namespace groupcoord {
namespace shm {

/// The outcome of attaching to a handle's ring.
struct HandleAttachment {
  std::unique_ptr<ShmRingBuffer> ring;  ///< null on failure
  std::int32_t status = 0;              ///< an AttachStatus (queue_handle.h)
  std::string error;                    ///< why, when status is not kAttachOk
};

/// Maps the ring `handle` describes (validated by the caller) and checks it matches.
HandleAttachment attach_to_handle(const MessageQueue::Handle& handle);

/// Claims reader slot `index` for this process (absent -> attached, atomically); false when
/// another reader already claimed it (the same rank attached twice).
bool claim_reader_slot(ShmRingBuffer& ring, int index);

/// Index of `rank` in handle.reader_ranks, or -1.
int reader_index_of(const MessageQueue::Handle& handle, int rank);

/// Removes the segment's name when every reader slot of `ring` shows an attachment (or a
/// reader that already left). Readers call it right after marking themselves attached with a
/// seq_cst store; with seq_cst loads here, of two readers attaching at once at least one sees
/// the other, so the last attacher always removes the name. Never throws.
void unlink_if_all_attached(ShmRingBuffer& ring);

/// Name of a queue read from an external writer, e.g. "mq[external writer pid 42]" or, with a
/// group, "mq[tp:0, external writer pid 42]".
std::string external_queue_name(const MessageQueue::Handle& handle, const std::string& group);

}  // namespace shm
}  // namespace groupcoord
