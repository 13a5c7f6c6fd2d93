// The CUDA op table by opset range (GPUOPT_CUDA_OP_RANGE): the model's opset picks the kernel of
// the op's form, as on the CPU (ir/ops_versions.inc), and an opset no kernel covers runs on the
// CPU. The table is static: no device needed.
#include "backends/cuda/cuda_ops.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

using cuda::cuda_op;
using cuda::cuda_op_ranges;

TEST(CudaOpRanges, FormsSplitWhereTheCpuFormsSplit) {
  // Two kernels, split where ONNX changed the op.
  for (auto [op, last_old] : {std::pair{Op::Softmax, 12}, {Op::LogSoftmax, 12}, {Op::Slice, 9}, {Op::Clip, 10},
                              {Op::Resize, 10}, {Op::Pad, 10}}) {
    const cuda::CudaOpEntry* old_form = cuda_op(op, last_old);
    const cuda::CudaOpEntry* new_form = cuda_op(op, last_old + 1);
    ASSERT_NE(old_form, nullptr) << op_name(op);
    ASSERT_NE(new_form, nullptr) << op_name(op);
    EXPECT_NE(old_form->run, new_form->run) << op_name(op);
    EXPECT_EQ(old_form->until, last_old) << op_name(op);
    EXPECT_EQ(new_form->since, last_old + 1) << op_name(op);
    EXPECT_EQ(new_form, cuda_op(op, 27)) << op_name(op);
    // Each CPU form boundary is a CUDA one too (the CUDA side may cover fewer opsets).
    const OpVersion* cpu_old = op_version(op, last_old);
    ASSERT_NE(cpu_old, nullptr);
    EXPECT_EQ(cpu_old->until, last_old) << op_name(op);
  }
}

TEST(CudaOpRanges, OpsetsWithoutAKernelFallBack) {
  EXPECT_EQ(cuda_op(Op::Pad, 1), nullptr);        // Pad-1's `paddings`: CPU only
  EXPECT_EQ(cuda_op(Op::Upsample, 10), nullptr);  // removed from ONNX at 10
  ASSERT_NE(cuda_op(Op::Upsample, 7), nullptr);
  ASSERT_NE(cuda_op(Op::Upsample, 9), nullptr);
  EXPECT_NE(cuda_op(Op::Upsample, 7)->run, cuda_op(Op::Upsample, 9)->run);
  EXPECT_EQ(cuda_op(Op::Det, 17), nullptr);       // no CUDA kernel at all
  // One kernel for every opset where the op never changed.
  ASSERT_EQ(cuda_op_ranges(Op::Relu).size(), 1u);
  EXPECT_EQ(cuda_op_ranges(Op::Relu)[0].since, 1);
  EXPECT_EQ(cuda_op_ranges(Op::Relu)[0].until, kOpsetMax);
}

TEST(CudaOpRanges, RangesAscendWithoutOverlap) {
  for (size_t i = 0; i < kNumOps; ++i) {
    const std::vector<cuda::CudaOpEntry> r = cuda_op_ranges(static_cast<Op>(i));
    for (size_t k = 0; k < r.size(); ++k) {
      EXPECT_LE(r[k].since, r[k].until) << op_name(static_cast<Op>(i));
      if (k > 0) {
        EXPECT_GT(r[k].since, r[k - 1].until) << op_name(static_cast<Op>(i));
      }
    }
  }
}

}  // namespace
}  // namespace gpuopt
