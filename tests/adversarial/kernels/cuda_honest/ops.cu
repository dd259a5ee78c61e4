// Honest CUDA kernels (no torch headers: this file compiles in about a second).
#include <cuda_runtime.h>

#include <cstdint>

__global__ void add_relu_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float v = a[i] + b[i];
    out[i] = v > 0.0f ? v : 0.0f;
  }
}

// One block per row; a shared-memory tree reduction over the row.
__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {
  __shared__ float partial[256];
  const float* row = x + blockIdx.x * cols;
  float acc = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

void launch_add_relu(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int blocks = static_cast<int>((n + threads - 1) / threads < 65535 ? (n + threads - 1) / threads : 65535);
  add_relu_kernel<<<blocks, threads, 0, stream>>>(a, b, out, n);
}

void launch_row_sum(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
  row_sum_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(x, out, cols);
}

__global__ void bias_add_kernel(float* __restrict__ out, const float* __restrict__ bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] += bias[i % cols];
}

void launch_bias_add(float* out, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t blocks = (rows * cols + 255) / 256;
  bias_add_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(out, bias, rows, cols);
}
