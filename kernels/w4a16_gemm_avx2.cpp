// Eigen GEMM for W4A16 prefill panels (see w4a16_gemm.h). Single-threaded per call: the caller
// splits panels across the thread pool (Eigen is built without OpenMP here).
#include "kernels/w4a16_gemm.h"

#include <Eigen/Core>

namespace fish {

void gemm_f32_panel_avx2(const float* x, int64_t m, int64_t k, const float* panel, int64_t n,
                         bool channel_major, float* y, int64_t ldy) {
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMat> xm(x, m, k);
  Eigen::Map<RowMat, 0, Eigen::OuterStride<>> ym(y, m, n, Eigen::OuterStride<>(ldy));
  if (channel_major) {
    ym.noalias() = xm * Eigen::Map<const RowMat>(panel, n, k).transpose();
  } else {
    ym.noalias() = xm * Eigen::Map<const RowMat>(panel, k, n);
  }
}

}  // namespace fish
