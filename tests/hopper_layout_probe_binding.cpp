// PyTorch binding of tests/hopper_layout_probe.cu: one_wgmma(a, b) -> the (128, 64) fp32
// accumulator registers of the warpgroup, row t = thread t, for fp16 a (64, 64) and b (128, 64).
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_fp16.h>

const char* launch_hopper_layout_probe(const __half* a, const __half* b, float* regs,
                                       cudaStream_t stream);

namespace {

void check_operand(const torch::Tensor& t, const char* name, int64_t rows) {
    TORCH_CHECK_VALUE(t.is_cuda() && t.scalar_type() == torch::kHalf && t.is_contiguous() &&
                          t.dim() == 2 && t.size(0) == rows && t.size(1) == 64,
                      name, " must be a contiguous fp16 CUDA tensor of shape (", rows,
                      ", 64), got ", t.sizes(), " ", t.scalar_type());
}

torch::Tensor one_wgmma(const torch::Tensor& a, const torch::Tensor& b) {
    check_operand(a, "a", 64);
    check_operand(b, "b", 128);
    torch::Tensor regs = torch::empty({128, 64}, a.options().dtype(torch::kFloat32));
    const char* err = launch_hopper_layout_probe(
        reinterpret_cast<const __half*>(a.data_ptr<at::Half>()),
        reinterpret_cast<const __half*>(b.data_ptr<at::Half>()), regs.data_ptr<float>(),
        at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == nullptr, err == nullptr ? "" : err);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return regs;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("one_wgmma", &one_wgmma, "one wgmma m64n128 (k = 64): every thread's accumulators");
}
