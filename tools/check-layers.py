#!/usr/bin/python3
"""Fails when a file of one layer includes a header of a layer above it (docs/architecture.md).

src/CMakeLists.txt links each layer only against the layers below it, but a header-only use of
an upper layer (an inline function, a type) links fine; this check catches those too, and
catches them before anything is built. ctest runs it as check_layers (label "tree").

  /usr/bin/python3 tools/check-layers.py        check the tree (exit 1 on an upward include)

Standard library only.
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Bottom to top. A file may include headers of its own layer and of any layer before it.
# store before bootstrap: bootstrap includes the stores (tcp://, file:// init), the stores never
# include bootstrap.
LAYERS = [
    "core",
    "store",
    "bootstrap",
    "process_group",
    "shm",
    "communicator",
    # src/cuda/ in its parts, each using only those before it: the CUDA runtime (streams,
    # allocator, copies, capture), NCCL (the loaded library, NcclComm), symmetric memory, and the
    # cuda communicator itself in src/cuda/.
    "cuda/runtime",
    "cuda/nccl",
    "cuda/symmetric",
    "cuda",
    "coordinator",
    "parallel_state",
    "python",
]
RANK = {layer: index for index, layer in enumerate(LAYERS)}

SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")

# include/groupcoord/<header> -> the layer whose src/ folder defines its declarations. Where a
# header is header-only, the reason says which layer it belongs to; those without a reason are
# defined in src/<layer>/ under the header's own name. A public header missing here fails the
# check: classify each new one.
PUBLIC_HEADERS = {
    "allocator.h": "core",
    "bytes.h": "core",  # header-only; groupcoord.h lists it under core
    "check.h": "core",  # header-only macros; groupcoord.h lists it under core
    "default_timeout.h": "core",
    "device.h": "core",
    "device_copy.h": "core",
    "dtype.h": "core",
    "errors.h": "core",  # header-only exception types; groupcoord.h lists it under core
    "half.h": "core",  # header-only conversions of core's 16/8-bit dtypes; groupcoord.h: core
    "logging.h": "core",
    "reduce_op.h": "core",  # header-only enum; groupcoord.h lists it under core
    "tensor.h": "core",
    "version.h": "core",  # generated from version.h.in; core/version.cc
    "wait_interrupt.h": "core",  # ScopedWaitInterrupt is defined in core/wake_word.cc
    "store.h": "store",  # the Store interface; its contract lives in store/store_semantics.*
    "file_store.h": "store",
    "hash_store.h": "store",
    "prefix_store.h": "store",
    "tcp_store.h": "store",  # store/tcp_store_client.cc and tcp_store_server.cc
    "torch_tcp_store.h": "store",  # store/torch_tcp_store.cc
    "init_method.h": "bootstrap",
    "launcher_env.h": "bootstrap",
    "rendezvous.h": "bootstrap",
    "process_group.h": "process_group",
    "work.h": "process_group",  # Work::~Work is defined in process_group/work.cc
    "world.h": "process_group",  # process_group/world.cc
    "message_queue.h": "shm",  # shm/message_queue.cc
    "device_communicator.h": "communicator",  # communicator/device_communicator_*.cc
    # Header-only; what DeviceCommunicator::symmetric_memory_stats() returns (plain data, no CUDA
    # types, so that every build has it), so it belongs to the interface, not to the cuda layer.
    "symmetric_memory.h": "communicator",
    "group_coordinator.h": "coordinator",
    # Header-only; the types of the coordinator's *_tensor_dict protocols
    # (coordinator/group_coordinator.cc); groupcoord.h lists it with the coordinator.
    "tensor_dict.h": "coordinator",
    "parallel_state.h": "parallel_state",
    "groupcoord.h": "parallel_state",  # the umbrella header: includes up to parallel_state.h
    "cuda/allocator.h": "cuda/runtime",  # cuda/runtime/cuda_allocator.cc
    "cuda/graph_capture.h": "cuda/runtime",  # cuda/runtime/graph_capture.cc
    # cuda/runtime/runtime.cc; its nccl_runtime_version() is defined above, in cuda/nccl/.
    "cuda/runtime.h": "cuda/runtime",
    "cuda/stream.h": "cuda/runtime",  # cuda/runtime/stream.cc
}

# Known upward includes that may stay until they are fixed: {(file, header): reason}, paths
# relative to the root. The check fails on any other, and on an entry whose include is gone, so
# the list only shrinks. Empty: the tree had no upward include when this check was added.
ALLOWED = {}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


class LayerError(Exception):
    """The tree has a file or public header this script cannot place in a layer."""


def rel(path):
    return os.path.relpath(path, ROOT).replace(os.sep, "/")


def source_files():
    """Every C++/CUDA file the layering covers, as paths relative to the root."""
    for top in ("src", "python/src", "include/groupcoord"):
        for folder, folders, names in os.walk(os.path.join(ROOT, top)):
            folders.sort()  # a stable order of the report
            for name in sorted(names):
                if name.endswith(SOURCE_SUFFIXES):
                    yield rel(os.path.join(folder, name))


def layer_of(path):
    """The layer of a file relative to the root; None for files outside the layering."""
    parts = path.split("/")
    if parts[:2] == ["python", "src"]:
        return "python"
    if parts[:2] == ["include", "groupcoord"]:
        header = "/".join(parts[2:])
        if header not in PUBLIC_HEADERS:
            raise LayerError(f"{path}: public header missing from PUBLIC_HEADERS in "
                             f"tools/check-layers.py: add it with the layer that defines it")
        return PUBLIC_HEADERS[header]
    if parts[0] == "src":
        # src/<layer>/..., at any depth; src/cuda/<part>/... is the layer "cuda/<part>".
        if len(parts) >= 4 and "/".join(parts[1:3]) in RANK:
            return "/".join(parts[1:3])
        if len(parts) < 3 or parts[1] not in RANK:
            raise LayerError(f"{path}: not in a layer folder of src/ "
                             f"(known: {', '.join(LAYERS[:-1])}); add the layer to LAYERS")
        return parts[1]
    return None


def resolve(including, name):
    """The file `#include "name"` in `including` reads, as the compiler finds it.

    Quoted includes search the including file's folder first, then the include directories:
    include/ and src/ (src/CMakeLists.txt, gc_common). None for headers outside the tree
    (nccl.h, generated files), which belong to no layer.
    """
    folders = [os.path.dirname(including), "include", "src"]
    for folder in folders:
        candidate = os.path.normpath(os.path.join(ROOT, folder, name))
        if os.path.isfile(candidate):
            return rel(candidate)
    return None


def includes(path):
    """(line number, included name) of each quoted #include; angle includes are system ones."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as source:
        for number, line in enumerate(source, start=1):
            match = INCLUDE.match(line)
            if match:
                yield number, match.group(1)


def violations(path):
    """Each upward include of one file: (line, header, header's layer)."""
    layer = layer_of(path)
    for number, name in includes(path):
        header = resolve(path, name)
        if header is None:
            continue
        header_layer = layer_of(header)
        if header_layer is not None and RANK[header_layer] > RANK[layer]:
            yield number, header, header_layer


def check():
    """Prints the verdict; returns the exit status."""
    files = list(source_files())
    found = []
    allowed_seen = set()
    for path in files:
        for number, header, header_layer in violations(path):
            if (path, header) in ALLOWED:
                allowed_seen.add((path, header))
                continue
            found.append(f"{path}:{number}: {layer_of(path)} includes {header} ({header_layer})")
    # A stale entry would let the include come back unnoticed: the list must only shrink.
    stale = sorted(set(ALLOWED) - allowed_seen)
    for path, header in stale:
        print(f"check-layers: ALLOWED entry {path} -> {header} no longer occurs: remove it")
    for line in found:
        print(line)
    if found:
        print(f"check-layers: {len(found)} upward include(s) in {len(files)} files "
              f"(layer order, bottom to top: {' < '.join(LAYERS)})")
    if found or stale:
        return 1
    print(f"check-layers: {len(files)} files, no upward include"
          + (f" ({len(ALLOWED)} allowed)" if ALLOWED else ""))
    return 0


def main():
    parser = argparse.ArgumentParser(
        description="Fails when a file of src/<layer>/, python/src/ (layer python) or "
        "include/groupcoord/ (layer from PUBLIC_HEADERS) includes a header of a higher layer.",
        epilog="layer order, bottom to top: " + " < ".join(LAYERS))
    parser.parse_args()
    try:
        return check()
    except LayerError as error:
        print(f"check-layers: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
