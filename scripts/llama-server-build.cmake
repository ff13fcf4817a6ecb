# Included into llama.cpp's build by scripts/setup-local-llm (CMAKE_PROJECT_llama.cpp_INCLUDE).
# What llama-server links but does not compute the model's numbers with is compiled cheaper
# than -O3: the HTTP server, JSON and chat templates and parsers (-O1, one unity source per
# up to 16 files: their headers parsed once, not once a file), the multimodal library
# (never run without --mmproj: -O0, one unity source), and libllama's per-architecture graph
# builders (-O1; run once per graph shape). ggml (the tensors) and libllama's core (decoding,
# sampling, the grammar, the vocabulary) keep -O3 and every flag they had: the same machine
# code, so the same replies, as fast (docs/decisions.md, issue 35, sessions 33 and 34).
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _deep_research_light_targets)

function(_deep_research_light_targets)
  # appended after the build type's -O3: the last -O counts
  foreach(target llama-common llama-common-base server-context llama-server-impl llama-server
                 cpp-httplib llama-ui vendor-hash llama)
    if(TARGET ${target})
      set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS -O1)
    endif()
  endforeach()
  set_property(TARGET mtmd APPEND PROPERTY COMPILE_OPTIONS -O0)
  # Unity builds: 16 files a source for common (more puts two `ordered_json`s in one), all of
  # the server's and mtmd's in one. Checked at -O0, function by function against the files
  # built one by one: the same code (docs/decisions.md, session 34).
  set_target_properties(llama-common PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
  set_target_properties(server-context llama-server-impl mtmd PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  # mtmd's helpers refuse to be compiled with its internal headers in view
  get_target_property(dir mtmd SOURCE_DIR)
  set_property(SOURCE "${dir}/mtmd-helper.cpp" "${dir}/mtmd-helper-gen.cpp" TARGET_DIRECTORY mtmd
               PROPERTY SKIP_UNITY_BUILD_INCLUSION ON)
  # libllama's core back to -O3 (its graph builders, models/*.cpp, are the unity-built rest)
  get_target_property(sources llama SOURCES)
  get_target_property(dir llama SOURCE_DIR)
  list(FILTER sources EXCLUDE REGEX "/models/[^/]*[.]cpp$")
  list(TRANSFORM sources PREPEND "${dir}/")
  set_property(SOURCE ${sources} TARGET_DIRECTORY llama APPEND PROPERTY COMPILE_OPTIONS -O3)
endfunction()
