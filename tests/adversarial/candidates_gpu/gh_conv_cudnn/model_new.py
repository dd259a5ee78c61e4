import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor conv3x3(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cudnn.h>

#define CHECK_CUDNN(call) TORCH_CHECK((call) == CUDNN_STATUS_SUCCESS, "cuDNN call failed")

__global__ void bias_add_nchw(float* out, const float* bias, int64_t n, int64_t channels, int64_t hw) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] += bias[(i / hw) % channels];
}

// Convolution through cuDNN (allowed under strict), bias in our own kernel.
torch::Tensor conv3x3(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  static cudnnHandle_t handle = nullptr;
  if (!handle) CHECK_CUDNN(cudnnCreate(&handle));
  CHECK_CUDNN(cudnnSetStream(handle, at::cuda::getCurrentCUDAStream()));
  const int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), K = w.size(0);
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&xd));
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&yd));
  CHECK_CUDNN(cudnnCreateFilterDescriptor(&wd));
  CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&cd));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, 3, 3));
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_CUDNN(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));  // no TF32: same precision as the reference
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H, W));
  auto y = torch::empty({N, K, H, W}, x.options());
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t ws_bytes = 0;
  CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, algo, &ws_bytes));
  auto ws = torch::empty({static_cast<int64_t>(ws_bytes) + 1}, x.options().dtype(torch::kUInt8));
  const float alpha = 1.0f, beta = 0.0f;
  CHECK_CUDNN(cudnnConvolutionForward(handle, &alpha, xd, x.data_ptr<float>(), wd, w.data_ptr<float>(), cd, algo,
                                      ws.data_ptr(), ws_bytes, &beta, yd, y.data_ptr<float>()));
  const int64_t n = y.numel();
  bias_add_nchw<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), b.data_ptr<float>(), n, K, (int64_t)H * W);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
  return y;
}
"""

ext = load_inline(name="gh_conv_cudnn", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["conv3x3"],
                  extra_include_paths=["@CUDNN_INCLUDE@"], extra_ldflags=["-L@CUDNN_LIB@", "@CUDNN_LINK@"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.conv = nn.Conv2d(*args, padding=1)

    def forward(self, x):
        return ext.conv3x3(x.contiguous(), self.conv.weight, self.conv.bias)
