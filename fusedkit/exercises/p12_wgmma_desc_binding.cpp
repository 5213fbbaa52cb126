// Python binding of exercise p12_wgmma_desc: p12's wgmma_tma step built from a copy of its source
// whose descriptors come from the learner's function (exercise_wgmma_tma, defined at the end of that
// copy). fp16 x (M, K) and W (N, K) with K % 8 == 0, fp32 b (N,) and y (M, N), all contiguous on
// the current device, and the current stream arrive from Python as addresses (data_ptr(),
// cuda_stream), so this file needs pybind11 alone; a launch error is a RuntimeError in one line.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

using Address = std::uintptr_t;

const char* exercise_wgmma_tma(Address x, Address w, Address b, Address y, int M, int N, int K,
                               float multiplier, float negative_slope, Address stream);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("wgmma_tma", [](Address x, Address w, Address b, Address y, int M, int N, int K,
                          float multiplier, float negative_slope, Address stream) {
        if (const char* err = exercise_wgmma_tma(x, w, b, y, M, N, K, multiplier, negative_slope, stream)) {
            throw std::runtime_error(std::string("wgmma_tma (your descriptor): ") + err);
        }
    }, "p12's wgmma_tma step built with the learner's descriptor: y = LeakyReLU((x @ W.T + b) * multiplier)");
}
