// The coordinator's shared-memory message queues: the use_message_queue_broadcaster fast path of
// broadcast_object, create_mq_broadcaster and create_single_reader_mq_broadcasters.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>

#include <string>

#include "coord_env.h"
#include "groupcoord/errors.h"
#include "groupcoord/message_queue.h"

// Allocations of at least kBigAllocation bytes made by this thread while counting: how many
// copies of a 64 KiB object a call makes.
namespace {
constexpr std::size_t kBigAllocation = 60 << 10;
thread_local bool counting_big_allocations = false;
thread_local int big_allocations = 0;
}  // namespace

void* operator new(std::size_t bytes) {
  if (counting_big_allocations && bytes >= kBigAllocation) ++big_allocations;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace groupcoord {
namespace testing {
namespace {

/// How many allocations of kBigAllocation bytes or more `fn` makes on this thread.
template <typename Fn>
int big_allocations_of(Fn fn) {
  big_allocations = 0;
  counting_big_allocations = true;
  fn();
  counting_big_allocations = false;
  return big_allocations;
}

class CoordinatorMessageQueue : public CoordinatorTest {};

Bytes message(int writer, int k) {
  return "msg " + std::to_string(k) + " from " + std::to_string(writer);
}

TEST_F(CoordinatorMessageQueue, BroadcasterCoordinatorBroadcastsObjectsFromEverySrc) {
  // Reversed order: group rank 0 (the queue's writer) is the last world rank.
  GroupCoordinator coord(reversed_layout(world_size()), local_rank(), "gloo",
                         /*use_device_communicator=*/true, /*use_message_queue_broadcaster=*/true,
                         "mq");
  EXPECT_EQ(coord.has_mq_broadcaster(), world_size() > 1);
  for (int src = 0; src < coord.world_size(); ++src) {
    const int src_world = coord.ranks()[src];
    for (int k = 0; k < 20; ++k) {  // src 0 travels through shared memory, the others via Gloo
      std::optional<Bytes> obj;
      if (coord.rank_in_group() == src) obj = message(src_world, k);
      EXPECT_EQ(coord.broadcast_object(obj, src), message(src_world, k)) << "src " << src;
    }
  }
  coord.barrier();
}

// The queue's route of broadcast_object_failed: the readers raise with the writer's text, and
// the queue goes on carrying objects.
TEST_F(CoordinatorMessageQueue, BroadcasterCoordinatorTellsReadersOfTheWritersFailure) {
  GroupCoordinator coord(world_layout(world_size()), local_rank(), "gloo",
                         /*use_device_communicator=*/true, /*use_message_queue_broadcaster=*/true,
                         "mq");
  if (!coord.has_mq_broadcaster()) GTEST_SKIP() << "no queue at world size 1";
  for (int k = 0; k < 3; ++k) {
    const std::string why = "cannot pickle step " + std::to_string(k);
    if (coord.rank_in_group() == 0) {
      coord.broadcast_object_failed(why, 0);
    } else {
      expect_error<SourceFailedError>([&] { coord.broadcast_object(std::nullopt, 0); },
                                      {coord.unique_name(), "broadcast_object",
                                       "src 0 failed instead of sending its object", why});
    }
    std::optional<Bytes> obj;
    if (coord.rank_in_group() == 0) obj = message(coord.ranks()[0], k);
    EXPECT_EQ(coord.broadcast_object(obj, 0), message(coord.ranks()[0], k));
  }
  coord.barrier();
}

// A big object of `writer`'s (beyond any short-string buffer), different for each k.
Bytes big_message(int writer, int k) {
  Bytes out(64 << 10, '\0');
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<char>((i * 7 + k + writer) & 0xFF);
  return out;
}

// broadcast_object of a Bytes (the template overloads): the source makes one copy of a held Bytes
// (its result, equal to it; the Bytes stays as it was) and none of a moved one (it comes back as
// the same buffer); the others receive it. On the queue's route (src 0), the CPU group's (other
// srcs), at world size 1 (the bypass) and through MessageQueue::broadcast_object.
TEST_F(CoordinatorMessageQueue, BroadcastingABytesCopiesNothingOnTheSource) {
  GroupCoordinator coord(reversed_layout(world_size()), local_rank(), "gloo",
                         /*use_device_communicator=*/true, /*use_message_queue_broadcaster=*/true,
                         "mq-bytes");
  for (int src = 0; src < coord.world_size(); ++src) {
    const int src_world = coord.ranks()[src];
    for (int k = 0; k < 3; ++k) {
      const Bytes expected = big_message(src_world, k);
      if (coord.rank_in_group() != src) {
        for (int call = 0; call < 3; ++call) {  // held, moved, const
          EXPECT_TRUE(coord.broadcast_object(std::nullopt, src) == expected) << "src " << src;
        }
        continue;
      }
      const Bytes held = big_message(src_world, k);
      Bytes copy;
      EXPECT_EQ(big_allocations_of([&] { copy = coord.broadcast_object(held, src); }), 1)
          << "src " << src << ": copies of a held Bytes";
      EXPECT_TRUE(copy == expected);
      EXPECT_TRUE(held == expected);
      Bytes moved = big_message(src_world, k);
      const char* const buffer = moved.data();
      Bytes back;
      EXPECT_EQ(big_allocations_of([&] { back = coord.broadcast_object(std::move(moved), src); }),
                0)
          << "src " << src << ": copies of a moved Bytes";
      EXPECT_EQ(back.data(), buffer) << "src " << src << ": the moved Bytes was copied";
      EXPECT_TRUE(back == expected);
      const Bytes constant = big_message(src_world, k);  // a const rvalue: held, copied once
      EXPECT_TRUE(coord.broadcast_object(std::move(constant), src) == expected);
    }
  }
  std::shared_ptr<MessageQueue> queue = coord.create_mq_broadcaster(0);
  if (queue) {
    const Bytes expected = big_message(coord.ranks()[0], 9);
    if (queue->is_writer()) {
      const Bytes held = expected;
      Bytes copy;
      EXPECT_EQ(big_allocations_of([&] { copy = queue->broadcast_object(held); }), 1);
      EXPECT_TRUE(copy == expected);
      Bytes moved = expected;
      const char* const buffer = moved.data();
      Bytes back;
      EXPECT_EQ(big_allocations_of([&] { back = queue->broadcast_object(std::move(moved)); }), 0);
      EXPECT_EQ(back.data(), buffer);
    } else {
      EXPECT_TRUE(queue->broadcast_object() == expected);
      EXPECT_TRUE(queue->broadcast_object() == expected);
    }
  }
  coord.barrier();
}

TEST_F(CoordinatorMessageQueue, MqBroadcasterFromTheLastRank) {
  GroupCoordinator& coord = world_coord();
  const int writer = coord.world_size() - 1;
  std::shared_ptr<MessageQueue> queue = coord.create_mq_broadcaster(writer);
  ASSERT_NE(queue, nullptr);
  for (int k = 0; k < 50; ++k) {
    std::optional<Bytes> obj;
    if (coord.rank_in_group() == writer) obj = message(writer, k);
    EXPECT_EQ(queue->broadcast_object(obj), message(writer, k));
  }
  coord.barrier();
}

// vLLM's external_writer_handle: a writer that belongs to no group (here a queue made on rank 0,
// written from a thread, as another process would) hands its handle to the writer rank; every
// rank of the group, the writer rank included, becomes a reader.
TEST_F(CoordinatorMessageQueue, MqBroadcasterFromAnExternalWriter) {
  GroupCoordinator& coord = world_coord();
  const int n = coord.world_size();
  std::unique_ptr<MessageQueue> external;
  std::optional<MessageQueue::Handle> handle;
  if (coord.rank_in_group() == 0) {
    external = MessageQueue::create(n, 1024, 4, {}, std::chrono::seconds(30));
    handle = external->export_handle();
  }
  std::thread writer;
  if (external) {
    writer = std::thread([&] {
      external->wait_until_ready();
      for (int k = 0; k < 20; ++k) external->enqueue(message(99, k));
    });
  }
  std::shared_ptr<MessageQueue> queue = coord.create_mq_broadcaster(0, handle, /*blocking=*/true);
  ASSERT_NE(queue, nullptr);
  EXPECT_TRUE(queue->is_reader());
  EXPECT_EQ(queue->num_readers(), n);
  for (int k = 0; k < 20; ++k) EXPECT_EQ(queue->dequeue(), message(99, k));
  if (writer.joinable()) writer.join();
  coord.barrier();
}

TEST_F(CoordinatorMessageQueue, SingleReaderQueues) {
  GroupCoordinator& coord = world_coord();
  const int reader = 0;
  auto queues = coord.create_single_reader_mq_broadcasters(reader);
  if (coord.rank_in_group() == reader) {
    ASSERT_EQ(static_cast<int>(queues.size()), coord.world_size() - 1);
    for (auto& queue : queues) {
      const int writer = queue->writer_rank();
      for (int k = 0; k < 5; ++k) EXPECT_EQ(queue->dequeue(), message(writer, k));
    }
  } else {
    ASSERT_EQ(queues.size(), 1u);
    for (int k = 0; k < 5; ++k) queues[0]->enqueue(message(coord.rank_in_group(), k));
  }
  coord.barrier();
}

TEST_F(CoordinatorMessageQueue, BadRanksAreRejected) {
  GroupCoordinator& coord = world_coord();
  expect_invalid_argument([&] { coord.create_mq_broadcaster(coord.world_size()); },
                          {coord.unique_name(), "create_mq_broadcaster", "writer_rank"});
  expect_invalid_argument([&] { coord.create_single_reader_mq_broadcasters(-1); },
                          {coord.unique_name(), "create_single_reader_mq_broadcasters", "-1"});
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
