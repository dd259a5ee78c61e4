// The module's contract on the GPU (docs/security.md, threats 39-44): honest kernels for a
// matrix product, a gram matrix and a training-mode BatchNorm, which contract_binding.cpp
// launches as they are (the honest twins) or in ways that cache by address, round operands to
// float16, or leave the running statistics alone.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kTile = 16;
constexpr int kThreads = 256;

// c = a @ b, tiled through shared memory, accumulating in float32. With kHalf the operands are
// rounded to float16 first, as half-precision tensor cores would take them.
template <bool kHalf>
__global__ void matmul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                              int M, int K, int N) {
  __shared__ float ta[kTile][kTile];
  __shared__ float tb[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < (K + kTile - 1) / kTile; ++t) {
    const int ka = t * kTile + threadIdx.x, kb = t * kTile + threadIdx.y;
    float va = (row < M && ka < K) ? a[row * K + ka] : 0.0f;
    float vb = (kb < K && col < N) ? b[kb * N + col] : 0.0f;
    if (kHalf) {
      va = __half2float(__float2half(va));
      vb = __half2float(__float2half(vb));
    }
    ta[threadIdx.y][threadIdx.x] = va;
    tb[threadIdx.y][threadIdx.x] = vb;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) c[row * N + col] = acc;
}

// g[i, j] = sum_k w[i, k] * w[j, k]; one thread per element.
__global__ void gram_kernel(const float* __restrict__ w, float* __restrict__ g, int R, int K) {
  const int i = blockIdx.y * kTile + threadIdx.y, j = blockIdx.x * kTile + threadIdx.x;
  if (i >= R || j >= R) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += w[i * K + k] * w[j * K + k];
  g[i * R + j] = acc;
}

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

// BatchNorm1d in training mode on x (B, C): one block per channel. The batch's mean and
// variance normalize the output; with `update` the running statistics move as torch's do
// (momentum, the unbiased variance) and channel 0 counts the batch.
__global__ void batchnorm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                 float* __restrict__ running_mean, float* __restrict__ running_var,
                                 int64_t* __restrict__ batches, float* __restrict__ y, int B, int C, float momentum,
                                 float eps, bool update) {
  const int c = blockIdx.x;
  float s = 0.0f;
  for (int i = threadIdx.x; i < B; i += kThreads) s += x[i * C + c];
  const float mean = block_sum(s) / B;
  float q = 0.0f;
  for (int i = threadIdx.x; i < B; i += kThreads) {
    const float d = x[i * C + c] - mean;
    q += d * d;
  }
  const float var = block_sum(q) / B;
  const float inv = rsqrtf(var + eps);
  for (int i = threadIdx.x; i < B; i += kThreads) y[i * C + c] = (x[i * C + c] - mean) * inv * w[c] + b[c];
  if (update && threadIdx.x == 0) {
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * var * B / (B - 1);
    if (c == 0) batches[0] += 1;
  }
}

// (x * mask).sum(-1) on a square x: one block per row. With kLower only the lower triangle is
// read, right while the mask's zeros are where a causal mask has them.
template <bool kLower>
__global__ void masked_row_sum_kernel(const float* __restrict__ x, const float* __restrict__ mask,
                                      float* __restrict__ out, int cols) {
  const int r = blockIdx.x;
  const int end = kLower ? r + 1 : cols;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < end; c += kThreads) acc += x[r * cols + c] * mask[r * cols + c];
  const float total = block_sum(acc);
  if (threadIdx.x == 0) out[r] = total;
}

}  // namespace

void launch_masked_row_sum(const float* x, const float* mask, float* out, int rows, int cols, bool lower,
                           cudaStream_t stream) {
  if (lower)
    masked_row_sum_kernel<true><<<rows, kThreads, 0, stream>>>(x, mask, out, cols);
  else
    masked_row_sum_kernel<false><<<rows, kThreads, 0, stream>>>(x, mask, out, cols);
}

void launch_matmul(const float* a, const float* b, float* c, int M, int K, int N, bool half, cudaStream_t stream) {
  const dim3 block(kTile, kTile), grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  if (half)
    matmul_kernel<true><<<grid, block, 0, stream>>>(a, b, c, M, K, N);
  else
    matmul_kernel<false><<<grid, block, 0, stream>>>(a, b, c, M, K, N);
}

void launch_gram(const float* w, float* g, int R, int K, cudaStream_t stream) {
  const dim3 block(kTile, kTile), grid((R + kTile - 1) / kTile, (R + kTile - 1) / kTile);
  gram_kernel<<<grid, block, 0, stream>>>(w, g, R, K);
}

void launch_batchnorm(const float* x, const float* w, const float* b, float* running_mean, float* running_var,
                      int64_t* batches, float* y, int B, int C, float momentum, float eps, bool update,
                      cudaStream_t stream) {
  batchnorm_kernel<<<C, kThreads, 0, stream>>>(x, w, b, running_mean, running_var, batches, y, B, C, momentum, eps,
                                                update);
}
