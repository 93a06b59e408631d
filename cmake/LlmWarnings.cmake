# Warnings for our own targets only (third-party headers come in as SYSTEM).
function(llm_warnings target)
  # -Werror=switch: an enum-keyed switch without default must list every value (name(), role tables).
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter -Werror=switch)
endfunction()
