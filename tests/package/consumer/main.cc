// Uses the installed headers and library: a world of one, a store round trip and an all_reduce,
// and the version the headers and the library say (one version for both).
#include <groupcoord/groupcoord.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  namespace gc = groupcoord;
  gc::RendezvousOptions options;
  options.init_method = "env://";
  gc::RendezvousResult world = gc::rendezvous(options, [](const std::string&) {
    return std::optional<std::string>();  // ignore the environment: a world of one
  });
  auto group = gc::ProcessGroup::create_world(world.store, world.rank, world.world_size, {});
  std::vector<float> values(8, 2.0f);
  group->all_reduce(values.data(), values.size(), gc::DType::Float32);
  gc::Tensor t = gc::Tensor::empty({2, 4}, gc::DType::Float32);
  bool ok = values[7] == 2.0f && t.numel() == 8 && gc::dtype_size(gc::DType::BFloat16) == 2;
  static_assert(GROUPCOORD_VERSION == GROUPCOORD_VERSION_MAJOR * 10000 +
                                          GROUPCOORD_VERSION_MINOR * 100 +
                                          GROUPCOORD_VERSION_PATCH);
  if (std::strcmp(gc::version(), GROUPCOORD_VERSION_STRING) != 0) {
    std::printf("consumer: library %s, headers %s\n", gc::version(), GROUPCOORD_VERSION_STRING);
    ok = false;
  }
  group->destroy();
  std::printf("consumer: %s\n", ok ? "ok" : "wrong results");
  return ok ? 0 : 1;
}
