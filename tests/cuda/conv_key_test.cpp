// The cuDNN convolution key (ops/conv/cuda/cudnn_conv.h) of 1-D, 2-D, channels-last and 3-D
// convolutions, and of transposed ones: which extents, pads, strides and dilations land in which
// field. A host computation: no device needed.
#include "ops/conv/cuda/cudnn_conv.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

using cuda::ConvKey;
using cuda::conv_key_of;
using cuda::forward_conv_key;

Node conv_node(std::vector<int64_t> pads, std::vector<int64_t> strides, std::vector<int64_t> dil, int64_t group) {
  Node n;
  n.op = Op::Conv;
  n.op_type = "Conv";
  n.attrs["pads"] = ints_attr(std::move(pads));
  n.attrs["strides"] = ints_attr(std::move(strides));
  n.attrs["dilations"] = ints_attr(std::move(dil));
  n.attrs["group"] = int_attr(group);
  return n;
}

TEST(ConvKey, OneDIsTwoDOfUnitHeight) {
  // x [2, 12, 129] (*) w [16, 3, 7], pad 3, stride 2, dilation 1, group 4 -> y [2, 16, 65].
  const ConvKey k = forward_conv_key(conv_node({3, 3}, {2}, {1}, 4), {2, 12, 129}, {16, 3, 7}, {2, 16, 65}, DType::F16,
                                     false);
  EXPECT_EQ(k.tie(), (ConvKey{2, 12, 1, 129, 16, 1, 7, 1, 65, 4, 0, 3, 1, 2, 1, 1, DType::F16, false}.tie()));
  EXPECT_EQ(k.d, 0);  // not a 3-D key
}

TEST(ConvKey, TwoDKeepsItsFields) {
  const ConvKey k = forward_conv_key(conv_node({1, 2, 1, 2}, {2, 3}, {1, 2}, 1), {1, 3, 17, 19}, {8, 3, 3, 5},
                                     {1, 8, 9, 5}, DType::F32, false);
  EXPECT_EQ(k.tie(), (ConvKey{1, 3, 17, 19, 8, 3, 5, 9, 5, 1, 1, 2, 2, 3, 1, 2, DType::F32, false}.tie()));
  EXPECT_EQ(cuda::conv_key_text(k), "1,3,17,19,8,3,5,9,5,1,1,2,2,3,1,2,f32,nchw");
}

TEST(ConvKey, ChannelsLastReadsTheLastAxisAsChannels) {
  // x [n, h, w, c], w [m, kh, kw, c/g], y [n, oh, ow, m].
  const ConvKey k = forward_conv_key(conv_node({1, 1, 1, 1}, {1, 1}, {1, 1}, 1), {2, 14, 15, 32}, {64, 3, 3, 32},
                                     {2, 14, 15, 64}, DType::F16, true);
  EXPECT_EQ(k.tie(), (ConvKey{2, 32, 14, 15, 64, 3, 3, 14, 15, 1, 1, 1, 1, 1, 1, 1, DType::F16, true}.tie()));
}

TEST(ConvKey, ThreeDHasItsDepth) {
  // x [1, 3, 9, 10, 11] (*) w [5, 3, 3, 4, 2], pads (2, 1, 0), strides (1, 2, 3), dilations (2, 1, 1).
  const ConvKey k = forward_conv_key(conv_node({2, 1, 0, 2, 1, 0}, {1, 2, 3}, {2, 1, 1}, 1), {1, 3, 9, 10, 11},
                                     {5, 3, 3, 4, 2}, {1, 5, 9, 5, 4}, DType::BF16, false);
  ConvKey want{1, 3, 10, 11, 5, 4, 2, 5, 4, 1, 1, 0, 2, 3, 1, 1, DType::BF16, false};
  want.d = 9;
  want.kd = 3;
  want.od = 9;
  want.pd = 2;
  want.sd = 1;
  want.dd = 2;
  EXPECT_EQ(k.tie(), want.tie());
  EXPECT_EQ(cuda::conv_key_text(k), "1,3,10,11,5,4,2,5,4,1,1,0,2,3,1,1,bf16,nchw,d9,3,9,2,1,2");
  // Keys that differ only in depth are different plans.
  ConvKey deeper = k;
  deeper.d = 10;
  EXPECT_TRUE(k < deeper || deeper < k);
}

TEST(ConvKey, TransposedTakesItsChannelsFromTheOutput) {
  // ConvTranspose x [2, 4, 4, 5, 3], w [4, 3, 3, 3, 3] (C, M/group, k), group 2 -> y [2, 6, 8, 10, 6]:
  // the forward convolution maps y's shape to x's, so m is y's channel count.
  const ConvKey k = conv_key_of(conv_node({1, 1, 1, 1, 1, 1}, {2, 2, 2}, {1, 1, 1}, 2), {2, 4, 4, 5, 3},
                                {4, 3, 3, 3, 3}, {2, 6, 8, 10, 6}, 6, DType::F32, false);
  EXPECT_EQ(k.c, 4);
  EXPECT_EQ(k.m, 6);
  EXPECT_EQ(k.group, 2);
  EXPECT_EQ(k.d, 4);
  EXPECT_EQ(k.od, 8);
  EXPECT_EQ(k.kd, 3);
  EXPECT_EQ(k.oh, 10);
  EXPECT_EQ(k.ow, 6);
  EXPECT_EQ(k.pd, 1);
  EXPECT_EQ(k.sd, 2);
}

TEST(ConvKey, MissingAttributesTakeTheirDefaults) {
  Node n;
  n.op = Op::Conv;
  n.op_type = "Conv";
  const ConvKey k = forward_conv_key(n, {1, 2, 7}, {3, 2, 3}, {1, 3, 5}, DType::F32, false);
  EXPECT_EQ(k.tie(), (ConvKey{1, 2, 1, 7, 3, 1, 3, 1, 5, 1, 0, 0, 1, 1, 1, 1, DType::F32, false}.tie()));
}

}  // namespace
}  // namespace gpuopt
