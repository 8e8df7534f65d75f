// Error messages name the source file relative to the repository ("src/core/tensor.cc:70: ..."),
// never the build machine's checkout path: the library is compiled with __FILE__'s prefix mapped
// away (-fmacro-prefix-map in the top-level CMakeLists.txt). GC_TEST_SOURCE_DIR is that checkout.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "groupcoord/check.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace {

std::string from_blob_error() {
  try {
    Tensor::from_blob(nullptr, {4}, DType::Float32);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(ErrorMessages, NameTheFileRelativeToTheRepository) {
  const std::string message = from_blob_error();
  ASSERT_FALSE(message.empty()) << "Tensor::from_blob(nullptr, {4}) did not throw";
  EXPECT_EQ(message.rfind("src/core/tensor.cc:", 0), 0u) << message;
  EXPECT_EQ(message.find(GC_TEST_SOURCE_DIR), std::string::npos) << message;
  EXPECT_NE(message.find("Tensor::from_blob: null data pointer for shape [4]"), std::string::npos)
      << message;
}

TEST(ErrorMessages, ChecksInThisFileAreRelativeToo) {
  // The same mapping applies to every target of the project (tests and the binding included).
  try {
    GC_CHECK(false, "op ", "x", ": value ", 3);
    FAIL() << "GC_CHECK(false) did not throw";
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("tests/core/test_error_messages.cc:", 0), 0u) << message;
    EXPECT_NE(message.find("check failed (false): op x: value 3"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace groupcoord
