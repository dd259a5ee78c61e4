// PooledLayerNorm on the GPU in one pass over x.
//
// One warp normalizes one token row held in registers (float4 loads, warp-shuffle sums for the
// mean and then the variance of the centered values), and adds the normalized row into
// per-lane accumulators. A block owns 64 consecutive tokens of one batch element; its 8 warps
// combine their accumulators in shared memory and the block adds its share of the average
// (with the affine transform applied, which is linear, so shares add up) into the output with
// one atomic per feature. x is read exactly once, with streaming loads since it is never reused.
// Only the CUDA runtime is included here, so this file compiles in about a second; the
// binding (pooled_layer_norm_binding.cpp) does the tensor checks and allocation.
#include <cuda_runtime.h>

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerBlock = 64;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// dim == VEC * 128: each lane holds VEC float4 of a row.
template <int VEC>
__global__ void __launch_bounds__(kThreads)
pooled_layer_norm_kernel(const float4* __restrict__ x, const float* __restrict__ weight,
                         const float* __restrict__ bias, float* __restrict__ out, int tokens, float eps) {
  constexpr int kDim = VEC * 128;
  constexpr int kDim4 = VEC * 32;
  __shared__ float4 partial[kWarps][kDim4];

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int b = blockIdx.y;
  const int t0 = blockIdx.x * kRowsPerBlock;
  const int t1 = min(t0 + kRowsPerBlock, tokens);

  float4 acc[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);

  for (int t = t0 + warp; t < t1; t += kWarps) {
    const float4* row = x + (static_cast<size_t>(b) * tokens + t) * kDim4;
    float4 v[VEC];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      v[i] = __ldcs(row + lane + 32 * i);
      s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    const float mean = warp_sum(s) * (1.f / kDim);
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      v[i].x -= mean; v[i].y -= mean; v[i].z -= mean; v[i].w -= mean;
      q += (v[i].x * v[i].x + v[i].y * v[i].y) + (v[i].z * v[i].z + v[i].w * v[i].w);
    }
    const float rstd = rsqrtf(warp_sum(q) * (1.f / kDim) + eps);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      acc[i].x += v[i].x * rstd; acc[i].y += v[i].y * rstd;
      acc[i].z += v[i].z * rstd; acc[i].w += v[i].w * rstd;
    }
  }
#pragma unroll
  for (int i = 0; i < VEC; ++i) partial[warp][lane + 32 * i] = acc[i];
  __syncthreads();

  const float scale = 1.f / static_cast<float>(tokens);
  const float bias_share = static_cast<float>(t1 - t0) * scale;
  const float* p = reinterpret_cast<const float*>(&partial[0][0]);
  float* o = out + static_cast<size_t>(b) * kDim;
  for (int d = threadIdx.x; d < kDim; d += kThreads) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += p[w * kDim + d];
    atomicAdd(o + d, s * scale * weight[d] + bias[d] * bias_share);
  }
}

}  // namespace

// Launches the kernel for x [batch, tokens, dim] (contiguous float32, 16-byte aligned) into a
// zero-filled out [batch, dim]; dim must be a multiple of 128 up to 1024.
cudaError_t pooled_layer_norm_launch(const float* x, const float* weight, const float* bias, float* out,
                                     int batch, int tokens, int dim, float eps, cudaStream_t stream) {
  if (dim % 128 != 0 || dim < 128 || dim > 1024 || batch <= 0 || batch > 65535 || tokens <= 0) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid((tokens + kRowsPerBlock - 1) / kRowsPerBlock, batch);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  switch (dim / 128) {
    case 1: pooled_layer_norm_kernel<1><<<grid, kThreads, 0, stream>>>(x4, weight, bias, out, tokens, eps); break;
    case 2: pooled_layer_norm_kernel<2><<<grid, kThreads, 0, stream>>>(x4, weight, bias, out, tokens, eps); break;
    case 3: pooled_layer_norm_kernel<3><<<grid, kThreads, 0, stream>>>(x4, weight, bias, out, tokens, eps); break;
    case 4: pooled_layer_norm_kernel<4><<<grid, kThreads, 0, stream>>>(x4, weight, bias, out, tokens, eps); break;
    case 5: pooled_layer_norm_kernel<5><<<grid, kThreads, 0, stream>>>(x4, weight, bias, out, tokens, eps); break;
    case 6: pooled_layer_norm_kernel<6><<<grid, kThreads, 0, stream>>>(x4, weight, bias, out, tokens, eps); break;
    case 7: pooled_layer_norm_kernel<7><<<grid, kThreads, 0, stream>>>(x4, weight, bias, out, tokens, eps); break;
    default: pooled_layer_norm_kernel<8><<<grid, kThreads, 0, stream>>>(x4, weight, bias, out, tokens, eps); break;
  }
  return cudaGetLastError();
}
