// relu(x) * scale in one pass over x.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void relu_scale_kernel(const float* __restrict__ in, float* __restrict__ out, float scale, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = in[i];
    out[i] = v > 0.f ? v * scale : 0.f;
  }
}

void launch_relu_scale(const float* in, float* out, float scale, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int64_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 65535 ? want : 65535);
  relu_scale_kernel<<<blocks, threads, 0, stream>>>(in, out, scale, n);
}
