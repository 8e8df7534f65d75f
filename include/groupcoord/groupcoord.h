// Everything public in one include: #include <groupcoord/groupcoord.h>
#pragma once

// core
#include "groupcoord/allocator.h"
#include "groupcoord/bytes.h"
#include "groupcoord/check.h"
#include "groupcoord/device.h"
#include "groupcoord/device_copy.h"
#include "groupcoord/dtype.h"
#include "groupcoord/errors.h"
#include "groupcoord/half.h"
#include "groupcoord/logging.h"
#include "groupcoord/reduce_op.h"
#include "groupcoord/tensor.h"

// stores
#include "groupcoord/file_store.h"
#include "groupcoord/hash_store.h"
#include "groupcoord/prefix_store.h"
#include "groupcoord/store.h"
#include "groupcoord/tcp_store.h"
#include "groupcoord/torch_tcp_store.h"
#include "groupcoord/version.h"

// bootstrap
#include "groupcoord/init_method.h"
#include "groupcoord/launcher_env.h"
#include "groupcoord/rendezvous.h"

// process groups
#include "groupcoord/process_group.h"
#include "groupcoord/work.h"
#include "groupcoord/world.h"

// communicators, coordinators, parallel state
#include "groupcoord/device_communicator.h"
#include "groupcoord/group_coordinator.h"
#include "groupcoord/message_queue.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/tensor_dict.h"
#include "groupcoord/wait_interrupt.h"
