# Per-file compile flags for lib/kernels. Source file properties are directory-scoped, so every
# directory that compiles kernel sources (lib/, the standalone NEON self-test) calls this once.
# The library stays portable: only the per-ISA units get -m flags, and kernels/dispatch.cpp
# decides at run time which of them may run. The compiler may use any extension a unit is built
# with anywhere in it, so each flag below needs its CPU check in that unit's has_*() there.
function(llm_kernel_source_flags kernel_dir)
  # Bit-exact activation quantizers: no fused multiply-add where llama.cpp rounds twice. ref_iq.cpp
  # fixes the IQ dots' float order with explicit std::fma only (GCC contracts C++ by default, and
  # AArch64 always has FMA).
  set_source_files_properties(${kernel_dir}/act_quant.cpp ${kernel_dir}/kernels_ref.cpp ${kernel_dir}/ref_lowbit.cpp ${kernel_dir}/ref_iq.cpp
    PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    set_source_files_properties(${kernel_dir}/kernels_avx2.cpp
      PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    set_source_files_properties(${kernel_dir}/kernels_avx512.cpp
      PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni")
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
    set_source_files_properties(${kernel_dir}/kernels_dotprod.cpp
      PROPERTIES COMPILE_OPTIONS "-march=armv8.2-a+dotprod")
  endif()
endfunction()
