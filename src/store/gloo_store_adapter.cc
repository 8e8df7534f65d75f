// groupcoord Store -> gloo::rendezvous::Store (see gloo_store_adapter.h).
#include "store/gloo_store_adapter.h"

#include <string>
#include <utility>
#include <vector>

#include "groupcoord/check.h"

namespace groupcoord {
namespace {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit GlooStoreAdapter(std::shared_ptr<groupcoord::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, Bytes(data.begin(), data.end()));
  }

  std::vector<char> get(const std::string& key) override {
    const Bytes value = store_->get(key);
    return std::vector<char>(value.begin(), value.end());
  }

  void wait(const std::vector<std::string>& keys) override {
    // Gloo's own default (30 s) would override the deadline the job configured.
    store_->wait(keys, store_->timeout());
  }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<groupcoord::Store> store_;
};

}  // namespace

std::shared_ptr<gloo::rendezvous::Store> make_gloo_store(std::shared_ptr<Store> store) {
  GC_CHECK(store != nullptr, "make_gloo_store: the store must not be null");
  return std::make_shared<GlooStoreAdapter>(std::move(store));
}

}  // namespace groupcoord
