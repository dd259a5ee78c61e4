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

// One block of 256 threads per row; `cols` a multiple of 4. Memory bound: the time is reading x.
__global__ void row_sum_kernel(const float4* __restrict__ x, float* __restrict__ y, int64_t cols4) {
  const float4* row = x + blockIdx.x * cols4;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < cols4; i += blockDim.x) {
    const float4 v = row[i];
    acc += (v.x + v.y) + (v.z + v.w);
  }
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  __shared__ float warp_sums[8];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < 8; ++w) total += warp_sums[w];
    y[blockIdx.x] = total;
  }
}

void launch_row_sum(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  row_sum_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(reinterpret_cast<const float4*>(x), y, cols / 4);
}

// Reads the whole of `buf` (n float4s) `passes` times over, from every SM: the device's memory
// bandwidth and its SMs, taken for as long as it runs.
__global__ void hog_kernel(const float4* __restrict__ buf, int64_t n, int passes, float* sink) {
  float acc = 0.0f;
  for (int p = 0; p < passes; ++p) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
      const float4 v = buf[i];
      acc += v.x + v.y + v.z + v.w;
    }
  }
  if (acc == 12345.0f) sink[blockIdx.x] = acc;  // never true; keeps the reads
}

// The same for as long as *flag (host memory mapped into the device) is set.
__global__ void hog_while_kernel(const volatile int* flag, const float4* __restrict__ buf, int64_t n, float* sink) {
  float acc = 0.0f;
  while (*flag) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
      const float4 v = buf[i];
      acc += v.x + v.y + v.z + v.w;
    }
  }
  if (acc == 12345.0f) sink[blockIdx.x] = acc;
}

void launch_hog(const float* buf, int64_t n_floats, int passes, float* sink, cudaStream_t stream) {
  hog_kernel<<<1056, 512, 0, stream>>>(reinterpret_cast<const float4*>(buf), n_floats / 4, passes, sink);
}

void launch_hog_while(const int* flag, const float* buf, int64_t n_floats, float* sink, cudaStream_t stream) {
  hog_while_kernel<<<1056, 512, 0, stream>>>(flag, reinterpret_cast<const float4*>(buf), n_floats / 4, sink);
}
