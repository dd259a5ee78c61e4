// One honest kernel: the row of each element. guard_tricks_binding.cpp does the rest in ATen.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

// idx[i] = i / cols: the row each element of a rows x cols tensor belongs to.
__global__ void row_index_kernel(int64_t* __restrict__ idx, int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    idx[i] = i / cols;
}

}  // namespace

void launch_row_index(int64_t* idx, int64_t n, int64_t cols, cudaStream_t stream) {
  const int64_t blocks = (n + 255) / 256;
  row_index_kernel<<<static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535), 256, 0, stream>>>(
      idx, n, cols);
}
