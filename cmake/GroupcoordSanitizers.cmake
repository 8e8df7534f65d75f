# Applies GROUPCOORD_SANITIZE (e.g. "address,undefined") to every target defined after this.
# Used by the `asan` preset; see docs/testing.md.
if(GROUPCOORD_SANITIZE)
  set(_gc_san_flags "-fsanitize=${GROUPCOORD_SANITIZE}" -fno-omit-frame-pointer
                    -fno-sanitize-recover=undefined)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_gc_san_flags}>")
  add_link_options("-fsanitize=${GROUPCOORD_SANITIZE}")
  unset(_gc_san_flags)
endif()
