// Whether this translation unit is built with AddressSanitizer (GCC says so with
// __SANITIZE_ADDRESS__, clang through __has_feature), and poisoning helpers that are no-ops
// without it: the allocator marks the slack around its small blocks, and the test that checks it
// skips without ASan.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define GROUPCOORD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GROUPCOORD_ASAN 1
#endif
#endif

#ifdef GROUPCOORD_ASAN
#include <sanitizer/asan_interface.h>
#define GC_POISON(address, size) ASAN_POISON_MEMORY_REGION(address, size)
#define GC_UNPOISON(address, size) ASAN_UNPOISON_MEMORY_REGION(address, size)
#else
#define GC_POISON(address, size) ((void)(address), (void)(size))
#define GC_UNPOISON(address, size) ((void)(address), (void)(size))
#endif
