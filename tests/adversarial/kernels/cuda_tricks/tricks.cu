// One honest relu kernel; the tricks are in how tricks_binding.cpp launches it.
#include <cuda_runtime.h>

#include <cstdint>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// A deliberately slow relu (many passes), so hiding it from the clock would matter.
__global__ void slow_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, int passes) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    float noise = 0.0f;
    for (int p = 0; p < passes; ++p) noise += sinf(v + p);  // busy work the compiler must keep
    y[i] = (v > 0.0f ? v : 0.0f) + 0.0f * noise;
  }
}

void launch_relu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  const int64_t blocks = (n + 255) / 256;
  relu_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(x, y, n);
}

void launch_slow_relu(const float* x, float* y, int64_t n, int passes, cudaStream_t stream) {
  const int64_t blocks = (n + 255) / 256;
  slow_relu_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(x, y, n, passes);
}
