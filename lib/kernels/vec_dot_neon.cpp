// AArch64 neon kernels.
#include "kernels/vec_dot_isa.h"

#if defined(__aarch64__)
namespace llm {
void vec_dot_fill_neon(VecDotFn *) {}
}  // namespace llm
#endif
