// AArch64 dotprod kernels.
#include "kernels/vec_dot_isa.h"

#if defined(__aarch64__)
namespace llm {
void vec_dot_fill_dotprod(VecDotFn *) {}
}  // namespace llm
#endif
