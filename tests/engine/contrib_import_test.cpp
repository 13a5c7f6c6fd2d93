// ONNX Runtime's contrib ops read at import (src/onnx/contrib_*.cpp): what they become, a naive
// attention in plain loops as the oracle for one Attention with key lengths, and the forms that
// are refused (one status naming the node, never a crash). ONNX Runtime itself is the oracle of
// every form in tests/python/test_contrib_ops.py; these run under the sanitizers too.
#include "backends/backend.h"
#include "model_builder.h"
#include "onnx/importer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpuopt {
namespace {

using namespace gpuopt::test;

constexpr int64_t kB = 2, kS = 3, kIn = 4, kHeads = 2, kHead = 2, kHidden = kHeads * kHead;

onnx::ModelProto with_contrib(onnx::ModelProto m) {
  auto* o = m.add_opset_import();
  o->set_domain("com.microsoft");
  o->set_version(1);
  return m;
}

void set_int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

std::vector<float> values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// x [batch, S, In] -> Attention(x, w, b, mask_index [batch] key lengths) -> y [batch, S, Hidden].
onnx::ModelProto attention_model(const std::vector<float>& w, const std::vector<float>& b) {
  auto m = with_contrib(make_model());
  add_input(&m, "x", onnx::TensorProto::FLOAT, {-1, kS, kIn}, {"batch", "", ""});
  add_input(&m, "len", onnx::TensorProto::INT32, {-1}, {"batch"});
  *m.mutable_graph()->add_initializer() = float_tensor("w", {kIn, 3 * kHidden}, w);
  *m.mutable_graph()->add_initializer() = float_tensor("b", {3 * kHidden}, b);
  auto* n = add_node(&m, "Attention", {"x", "w", "b", "len"}, {"y"}, "attn");
  n->set_domain("com.microsoft");
  set_int_attr(n, "num_heads", kHeads);
  add_output(&m, "y");
  return m;
}

TEST(ContribImport, AttentionBecomesStandardNodesAndMatchesNaiveLoops) {
  const std::vector<float> w = values(kIn * 3 * kHidden, 1), b = values(3 * kHidden, 2), x = values(kB * kS * kIn, 3);
  const std::vector<int32_t> len = {3, 2};
  auto g = import_onnx_model(attention_model(w, b), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  int attention = 0, contrib = 0;
  for (const Node& n : g->nodes()) {
    contrib += n.domain == "com.microsoft";
    if (n.op == Op::Attention) {
      ++attention;
      EXPECT_EQ(n.attr_i("q_num_heads", 0), kHeads);
      EXPECT_EQ(n.name, "attn/Attention_" + n.name.substr(n.name.rfind('_') + 1));
    }
  }
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(contrib, 0);
  const Value& y = g->value(*g->find_value("y"));
  ASSERT_TRUE(y.info.rank_known);
  EXPECT_EQ(g->shape_string(y.info.shape), "[batch,3,4]");

  auto exe = make_cpu_backend()->compile(*g, {});
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = (*exe)->run({Tensor::from_vector(DType::F32, {kB, kS, kIn}, x),
                          Tensor::from_vector(DType::I32, {kB}, len)},
                         {});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // The oracle: qkv = x w + b; per head softmax(q.k / sqrt(head) + (key < len ? 0 : -10000)) v.
  for (int64_t bi = 0; bi < kB; ++bi)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t i = 0; i < kS; ++i) {
        auto proj = [&](int64_t s, int64_t part, int64_t d) {
          const int64_t col = part * kHidden + h * kHead + d;
          double v = b[col];
          for (int64_t c = 0; c < kIn; ++c) v += double{x[(bi * kS + s) * kIn + c]} * w[c * 3 * kHidden + col];
          return v;
        };
        std::vector<double> p(kS);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < kS; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < kHead; ++d) dot += proj(i, 0, d) * proj(j, 1, d);
          p[j] = dot / std::sqrt(double{kHead}) + (j < len[bi] ? 0.0 : -10000.0);
          mx = std::max(mx, p[j]);
        }
        for (double& v : p) sum += (v = std::exp(v - mx));
        for (int64_t d = 0; d < kHead; ++d) {
          double want = 0;
          for (int64_t j = 0; j < kS; ++j) want += p[j] / sum * proj(j, 2, d);
          EXPECT_NEAR((*out)[0].get_f64((bi * kS + i) * kHidden + h * kHead + d), want, 1e-5)
              << "batch " << bi << " head " << h << " query " << i << " dim " << d;
        }
      }
}

// Each refused form: the status names the node and the reason.
void expect_refused(onnx::ModelProto m, const std::string& reason) {
  auto g = import_onnx_model(m, "");
  ASSERT_FALSE(g.ok()) << reason;
  EXPECT_NE(g.status().message().find("node 'attn'"), std::string::npos) << g.status().to_string();
  EXPECT_NE(g.status().message().find(reason), std::string::npos) << g.status().to_string();
}

TEST(ContribImport, UnsupportedFormsAreRefusedNamingTheNode) {
  const std::vector<float> w = values(kIn * 3 * kHidden, 1), b = values(3 * kHidden, 2);
  {
    auto m = attention_model(w, b);  // a KV cache
    add_input(&m, "past", onnx::TensorProto::FLOAT, {2, -1, kHeads, 5, kHead}, {"", "batch"});
    m.mutable_graph()->mutable_node(0)->add_input("past");
    expect_refused(m, "input 4 (past: a KV cache) is not supported");
  }
  {
    auto m = attention_model(w, b);
    m.mutable_graph()->mutable_node(0)->add_output("present");
    expect_refused(m, "output 1 (present: a KV cache) is not supported");
  }
  {
    auto m = attention_model(w, b);
    set_int_attr(m.mutable_graph()->mutable_node(0), "do_rotary", 1);
    expect_refused(m, "do_rotary=1 is not supported");
  }
  {
    auto m = attention_model(w, b);
    m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_i(0);
    expect_refused(m, "num_heads 0 must be positive");
  }
  {
    auto m = attention_model(w, b);  // a mask index of an unknown kind: [7] for batch 2
    *m.mutable_graph()->mutable_input(0) = onnx::ValueInfoProto();
    add_value_info(m.mutable_graph()->mutable_input(0), "x", onnx::TensorProto::FLOAT, {2, kS, kIn});
    *m.mutable_graph()->mutable_input(1) = onnx::ValueInfoProto();
    add_value_info(m.mutable_graph()->mutable_input(1), "len", onnx::TensorProto::INT32, {7});
    expect_refused(m, "is neither [batch] nor [2 * batch]");
  }
  {
    auto m = attention_model(w, b);  // a float mask
    *m.mutable_graph()->mutable_input(1) = onnx::ValueInfoProto();
    add_value_info(m.mutable_graph()->mutable_input(1), "len", onnx::TensorProto::FLOAT, {-1}, {"batch"});
    expect_refused(m, "the mask has dtype f32; expected int32");
  }
  {
    auto m = attention_model(w, b);  // the input not 3-D
    *m.mutable_graph()->mutable_input(0) = onnx::ValueInfoProto();
    add_value_info(m.mutable_graph()->mutable_input(0), "x", onnx::TensorProto::FLOAT, {-1, kIn}, {"batch"});
    expect_refused(m, "input must be 3-D");
  }
  {
    auto m = attention_model(w, b);  // Attention with no output asked
    m.mutable_graph()->mutable_node(0)->set_output(0, "");
    m.mutable_graph()->clear_output();
    expect_refused(m, "its output 0 is not used");
  }
}

TEST(ContribImport, RotaryOffsetAndMultiHeadAttentionForms) {
  // RotaryEmbedding with a [1] position offset on a 3-D input, then MultiHeadAttention reading
  // it as query, key and value with a [batch, T] key padding mask.
  auto m = with_contrib(make_model());
  add_input(&m, "x", onnx::TensorProto::FLOAT, {-1, kS, kHidden}, {"batch"});
  add_input(&m, "off", onnx::TensorProto::INT64, {1});
  add_input(&m, "kpm", onnx::TensorProto::INT32, {-1, kS}, {"batch"});
  const int64_t max_pos = 8;
  *m.mutable_graph()->add_initializer() = float_tensor("cos", {max_pos, kHead / 2}, values(max_pos * kHead / 2, 4));
  *m.mutable_graph()->add_initializer() = float_tensor("sin", {max_pos, kHead / 2}, values(max_pos * kHead / 2, 5));
  auto* r = add_node(&m, "RotaryEmbedding", {"x", "off", "cos", "sin"}, {"xr"}, "rot");
  r->set_domain("com.microsoft");
  set_int_attr(r, "num_heads", kHeads);
  auto* a = add_node(&m, "MultiHeadAttention", {"xr", "xr", "x", "", "kpm"}, {"y"}, "attn");
  a->set_domain("com.microsoft");
  set_int_attr(a, "num_heads", kHeads);
  set_int_attr(a, "unidirectional", 1);
  add_output(&m, "y");
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  int rotary = 0, attention = 0;
  for (const Node& n : g->nodes()) {
    if (n.op == Op::RotaryEmbedding) {
      ++rotary;
      ASSERT_EQ(n.inputs.size(), 4u);  // X, cos, sin, position_ids [batch, S]
      const ValueInfo& p = g->value(n.inputs[3]).info;  // Range(offset, offset + S): S known at run time
      EXPECT_EQ(g->shape_string(p.shape), "[batch,?]");
    }
    if (n.op == Op::Attention) {
      ++attention;
      EXPECT_EQ(n.attr_i("is_causal", 0), 1);
    }
  }
  EXPECT_EQ(rotary, 1);
  EXPECT_EQ(attention, 1);
  auto exe = make_cpu_backend()->compile(*g, {});
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = (*exe)->run({Tensor::from_vector(DType::F32, {kB, kS, kHidden}, values(kB * kS * kHidden, 6)),
                          Tensor::from_vector(DType::I64, {1}, std::vector<int64_t>{2}),
                          Tensor::from_vector(DType::I32, {kB, kS}, std::vector<int32_t>{1, 1, 0, 1, 0, 1})},
                         {});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape(), (Shape{kB, kS, kHidden}));
  for (int64_t i = 0; i < (*out)[0].numel(); ++i) EXPECT_TRUE(std::isfinite((*out)[0].get_f64(i)));
}

}  // namespace
}  // namespace gpuopt
