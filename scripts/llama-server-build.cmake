# Included into llama.cpp's build by scripts/setup-local-llm (CMAKE_PROJECT_llama.cpp_INCLUDE).
# What llama-server links but does not compute the model's numbers with is compiled at -O1
# instead of -O3: the HTTP server, JSON and chat templates, the multimodal library (never run
# here), and libllama's per-architecture graph builders (run once per graph shape). That is
# much of the build's CPU. ggml (the tensors) and libllama's core (decoding, sampling, the
# grammar, the vocabulary) keep -O3 and every flag they had: the same replies, as fast.
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _deep_research_light_targets)

function(_deep_research_light_targets)
  # appended after the build type's -O3: the last -O counts
  foreach(target mtmd llama-common llama-common-base server-context llama-server-impl llama-server
                 cpp-httplib llama-ui vendor-hash llama)
    if(TARGET ${target})
      set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS -O1)
    endif()
  endforeach()
  # libllama's core back to -O3 (its graph builders, models/*.cpp, are the unity-built rest)
  get_target_property(sources llama SOURCES)
  get_target_property(dir llama SOURCE_DIR)
  list(FILTER sources EXCLUDE REGEX "/models/[^/]*[.]cpp$")
  list(TRANSFORM sources PREPEND "${dir}/")
  set_property(SOURCE ${sources} TARGET_DIRECTORY llama APPEND PROPERTY COMPILE_OPTIONS -O3)
endfunction()
