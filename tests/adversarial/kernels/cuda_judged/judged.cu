// Honest kernels for the judge's threats 30-35 on the GPU: judged_binding.cpp launches them as
// they are (the honest twins) or in ways that replay, approximate or hand work to the judge.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;

// The sum of `v` over a block of kThreads threads, in thread 0.
__device__ float block_sum(float v) {
  __shared__ float part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const float total = part[0];
  __syncthreads();
  return total;
}

__device__ float block_max(float v) {
  __shared__ float part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  const float most = part[0];
  __syncthreads();
  return most;
}

// One block per row: the share of positive values.
__global__ void fraction_positive_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  const float* row = x + blockIdx.x * cols;
  float n = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) n += row[c] > 0.0f ? 1.0f : 0.0f;
  const float total = block_sum(n);
  if (threadIdx.x == 0) y[blockIdx.x] = total / static_cast<float>(cols);
}

// out[r, j] = relu(b[j] + sum_k table[ids[r], k] * w[j, k]); one thread per output.
__global__ void gather_linear_relu_kernel(const float* __restrict__ table, const int64_t* __restrict__ ids,
                                          const float* __restrict__ w, const float* __restrict__ b,
                                          float* __restrict__ out, int64_t n, int64_t k_dim, int64_t n_out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * n_out) return;
  const int64_t r = i / n_out, j = i % n_out;
  const float* e = table + ids[r] * k_dim;
  const float* wj = w + j * k_dim;
  float acc = b[j];
  for (int64_t k = 0; k < k_dim; ++k) acc += e[k] * wj[k];
  out[i] = acc > 0.0f ? acc : 0.0f;
}

// One block per row: exp(x - max) / sum.
__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  const float* row = x + blockIdx.x * cols;
  float* dst = y + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, row[c]);
  m = block_max(m);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += expf(row[c] - m);
  s = block_sum(s);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) dst[c] = expf(row[c] - m) / s;
}

__global__ void exp_scaled_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = expf(x[i]) * scale;
}

// One block per row: scale * the sum of every `step`-th element.
__global__ void row_sum_strided_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols, int step,
                                       float scale) {
  const float* row = x + blockIdx.x * cols;
  float acc = 0.0f;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * step; c < cols; c += static_cast<int64_t>(kThreads) * step)
    acc += row[c];
  const float total = block_sum(acc);
  if (threadIdx.x == 0) y[blockIdx.x] = total * scale;
}

__global__ void relu_repeated_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, int copies) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i] > 0.0f ? x[i] : 0.0f;
    for (int c = 0; c < copies; ++c) y[c * n + i] = v;
  }
}

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace

void launch_fraction_positive(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  fraction_positive_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols);
}

void launch_gather_linear_relu(const float* table, const int64_t* ids, const float* w, const float* b, float* out,
                               int64_t n, int64_t k_dim, int64_t n_out, cudaStream_t stream) {
  const int64_t total = n * n_out;
  gather_linear_relu_kernel<<<static_cast<unsigned>((total + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      table, ids, w, b, out, n, k_dim, n_out);
}

void launch_softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  softmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols);
}

void launch_exp_scaled(const float* x, float* y, int64_t n, float scale, cudaStream_t stream) {
  exp_scaled_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n, scale);
}

void launch_row_sum_strided(const float* x, float* y, int64_t rows, int64_t cols, int step, float scale,
                            cudaStream_t stream) {
  row_sum_strided_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols, step, scale);
}

void launch_relu_repeated(const float* x, float* y, int64_t n, int copies, cudaStream_t stream) {
  relu_repeated_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n, copies);
}

void launch_relu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  relu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
}
