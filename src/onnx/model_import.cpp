// ModelProto -> Graph: opset check, initializers, inputs/outputs with symbolic dims, nodes.
#include "core/log.h"
#include "onnx/import_detail.h"
#include "onnx/onnx.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <string_view>
#include <unordered_map>

namespace gpuopt {
namespace {

using onnx_detail::constant_node_value;
using onnx_detail::convert_attribute;

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Ops of other domains in gpuopt's op list: ONNX Runtime's com.microsoft FusedConv, FusedGemm and
// SkipLayerNormalization, ONNX's training optimizers (ai.onnx.preview.training) and classical-ML
// ops (ai.onnx.ml), and gpuopt's own channels-last ops (ai.gpuopt, written by the layout_nhwc
// pass). They are read only in their own domain (a default-domain "FusedConv" is as unknown as in ONNX itself).
struct DomainOp {
  std::string_view domain, op;
};
constexpr DomainOp kDomainOps[] = {
    {"com.microsoft", "FusedConv"}, {"ai.gpuopt", "NhwcFusedConv"}, {"ai.gpuopt", "NhwcMaxPool"},
    {"ai.gpuopt", "Int8Gemm"}, {"com.microsoft", "FusedGemm"}, {"com.microsoft", "SkipLayerNormalization"},
    {"ai.gpuopt", "Int8Conv"}, {"ai.gpuopt", "Int8Add"}, {"ai.gpuopt", "Fp8Gemm"}, {"ai.gpuopt", "ToNhwc"},
    {"ai.onnx.preview.training", "Adagrad"}, {"ai.onnx.preview.training", "Adam"},
    {"ai.onnx.preview.training", "Momentum"}, {"ai.onnx.ml", "LabelEncoder"}, {"ai.onnx.ml", "Binarizer"},
    {"ai.onnx.ml", "ArrayFeatureExtractor"}, {"ai.onnx.ml", "TreeEnsemble"}};

bool is_contrib_op(const std::string& domain, const std::string& op) {
  for (const DomainOp& d : kDomainOps)
    if (d.domain == domain && d.op == op) return true;
  return false;
}
bool is_other_domain_op_name(const std::string& op) {
  for (const DomainOp& d : kDomainOps)
    if (d.op == op) return true;
  return false;
}

// Type and shape of a graph input/output/value_info. A leading dim with neither a value nor a
// name (or -1) becomes the symbol "batch": the dynamic batch dimension.
Result<ValueInfo> convert_value_info(const onnx::ValueInfoProto& vi, Graph* g, bool leading_is_batch, const char* kind) {
  ValueInfo info;
  if (!vi.has_type()) return info;
  // An optional holding a tensor is read as that tensor (an empty optional cannot be given).
  const onnx::TypeProto& tp = vi.type().has_optional_type() && vi.type().optional_type().elem_type().has_tensor_type()
                                  ? vi.type().optional_type().elem_type()
                                  : vi.type();
  if (!tp.has_tensor_type())
    return Status::Unimplemented("graph {} '{}' is not a tensor (sequence, map, optional and sparse values are not "
                                 "supported)",
                                 kind, vi.name());
  const auto& tt = tp.tensor_type();
  const std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
  if (!dt || *dt == DType::Undefined)
    return Status::Unimplemented("graph {} '{}' has unsupported dtype {}", kind, vi.name(), onnx_dtype_name(tt.elem_type()));
  info.dtype = *dt;
  if (!tt.has_shape()) return info;
  info.rank_known = true;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    // No tensor has an extent of 2^40 (a trillion elements along one axis); a declared one that
    // large only feeds overflows into the window and shape arithmetic of the ops it reaches.
    if (d.has_dim_value() && d.dim_value() > (int64_t{1} << 40))
      return Status::InvalidArgument("graph {} '{}': dim {} is {}, larger than any tensor can be (2^40)", kind, vi.name(),
                                     i, d.dim_value());
    if (d.has_dim_value() && d.dim_value() >= 0) info.shape.push_back(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty()) info.shape.push_back(g->symbol_dim(d.dim_param()));
    else if (i == 0 && leading_is_batch) info.shape.push_back(g->symbol_dim("batch"));
    else info.shape.push_back(kUnknownDim);
  }
  return info;
}

struct Importer {
  const onnx::ModelProto& model;
  std::string model_dir;
  Graph g;
  std::unordered_map<std::string, ValueId> by_name;
  // A subgraph (If branch, Loop/Scan body): a name it does not define is an outer value, which
  // becomes one of its inputs after the formal ones (captures, in first-use order).
  bool is_subgraph = false;
  std::vector<std::string> captures;
  // Per node index: the outer names its subgraphs read, appended to its inputs by resolve_inputs.
  std::unordered_map<int, std::vector<std::string>> node_captures;

  Result<ValueId> resolve_name(const std::string& name, const std::string& where) {
    if (auto it = by_name.find(name); it != by_name.end()) return it->second;
    if (!is_subgraph)
      return Status::InvalidArgument("{}: input '{}' is not a graph input, an initializer or the output of any node",
                                     where, name);
    const ValueId id = g.add_value(name);
    g.value(id).is_graph_input = true;
    g.mutable_inputs().push_back(id);
    by_name.emplace(name, id);
    captures.push_back(name);
    return id;
  }

  Status add_named(const std::string& name, ValueId id, const std::string& what) {
    if (!by_name.emplace(name, id).second)
      return Status::InvalidArgument("value '{}' is defined twice (second time by {})", name, what);
    return Status::Ok();
  }

  Status run() {
    int opset = -1;
    for (const auto& o : model.opset_import())
      if (is_default_domain(o.domain())) opset = static_cast<int>(o.version());
    bool default_nodes = false;
    for (const auto& n : model.graph().node()) default_nodes = default_nodes || is_default_domain(n.domain());
    // A model of only other-domain nodes fails below, naming the first op and its domain.
    if (opset < 0 && default_nodes) return Status::InvalidArgument("model imports no default-domain (ai.onnx) opset");
    if (opset >= 0 && (opset < kMinOpset || opset > kMaxOpset))
      return Status::Unimplemented("default-domain opset {} is not supported (gpuopt reads opsets {}-{})", opset,
                                   kMinOpset, kMaxOpset);
    g.opset = opset;
    for (const auto& o : model.opset_import())
      if (!is_default_domain(o.domain())) g.domain_opsets[o.domain()] = static_cast<int>(o.version());
    g.ir_version = model.ir_version();
    g.producer_name = model.producer_name();
    const onnx::GraphProto& gp = model.graph();
    g.name = gp.name();
    GPUOPT_RETURN_IF_ERROR(import_body(gp));
    return g.topo_sort();
  }

  // Initializers, inputs, nodes, outputs and value_info of the main graph or of a subgraph.
  Status import_body(const onnx::GraphProto& gp) {
    if (gp.sparse_initializer_size() > 0)
      return Status::Unimplemented("sparse initializer '{}' is not supported", gp.sparse_initializer(0).values().name());

    for (const auto& init : gp.initializer()) {
      GPUOPT_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(init, model_dir, fmt::format("initializer '{}'", init.name())));
      ValueId id = g.add_constant(init.name(), std::move(t));
      GPUOPT_RETURN_IF_ERROR(add_named(init.name(), id, "an initializer"));
    }
    for (const auto& in : gp.input()) {
      // IR < 4 lists initializers among the inputs too; the initializer wins (it is a weight).
      if (by_name.count(in.name())) {
        if (g.value(by_name[in.name()]).constant) continue;
        return Status::InvalidArgument("graph input '{}' is listed twice", in.name());
      }
      GPUOPT_ASSIGN_OR_RETURN(ValueInfo info, convert_value_info(in, &g, !is_subgraph, "input"));
      // A subgraph's inputs may leave their type to the node that runs it.
      if (info.dtype == DType::Undefined && !is_subgraph)
        return Status::InvalidArgument("graph input '{}' has no tensor type", in.name());
      ValueId id = g.add_input(in.name(), info.dtype, info.shape);
      g.value(id).info = info;
      g.value(id).declared = info;
      GPUOPT_RETURN_IF_ERROR(add_named(in.name(), id, "a graph input"));
    }
    GPUOPT_RETURN_IF_ERROR(add_nodes(gp));
    for (const auto& out : gp.output()) {
      if (!is_subgraph && !by_name.count(out.name()))
        return Status::InvalidArgument("graph output '{}' is not produced by any node, input or initializer", out.name());
      GPUOPT_ASSIGN_OR_RETURN(const ValueId id, resolve_name(out.name(), "subgraph output"));
      GPUOPT_ASSIGN_OR_RETURN(ValueInfo info, convert_value_info(out, &g, !is_subgraph, "output"));
      if (g.value(id).producer >= 0 || g.value(id).is_graph_input || !is_subgraph) g.value(id).declared = info;
      g.mark_output(id);
    }
    for (const auto& vi : gp.value_info()) {
      auto it = by_name.find(vi.name());
      if (it == by_name.end()) continue;  // a hint about a value nobody produces: harmless
      auto info = convert_value_info(vi, &g, false, "value_info");
      if (info.ok() && g.value(it->second).producer >= 0) g.value(it->second).declared = *info;
    }
    return Status::Ok();
  }

  // One subgraph attribute, imported in its own scope (outer names become captures).
  Result<std::unique_ptr<Importer>> import_subgraph(const onnx::GraphProto& gp, const std::string& where) {
    auto sub = std::make_unique<Importer>(Importer{model, model_dir, Graph{}, {}, true, {}, {}});
    sub->is_subgraph = true;
    sub->g.opset = g.opset;
    sub->g.domain_opsets = g.domain_opsets;
    sub->g.ir_version = g.ir_version;
    sub->g.name = gp.name();
    Status st = sub->import_body(gp);
    if (st.ok()) st = sub->g.topo_sort();
    if (!st.ok()) return st.with_context(fmt::format("{}: subgraph '{}'", where, gp.name()));
    return sub;
  }

  // The node's subgraph attributes: each subgraph's inputs become its formal inputs followed by
  // the union of every subgraph's captures (so one list of extra node inputs serves them all).
  Status add_subgraphs(const onnx::NodeProto& np, const std::string& where, AttributeMap* attrs,
                       std::vector<std::string>* caps) {
    std::vector<std::pair<std::string, std::unique_ptr<Importer>>> subs;
    for (const auto& a : np.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPHS || a.graphs_size() > 0)
        return Status::Unimplemented("{}: attribute '{}' is a list of subgraphs, which gpuopt does not support", where,
                                     a.name());
      if (a.type() != onnx::AttributeProto::GRAPH && !(a.type() == onnx::AttributeProto::UNDEFINED && a.has_g()))
        continue;
      GPUOPT_ASSIGN_OR_RETURN(auto sub, import_subgraph(a.g(), fmt::format("{} attribute '{}'", where, a.name())));
      for (const std::string& c : sub->captures)
        if (std::find(caps->begin(), caps->end(), c) == caps->end()) caps->push_back(c);
      subs.emplace_back(a.name(), std::move(sub));
    }
    for (auto& [name, sub] : subs) {
      std::vector<ValueId> inputs = sub->g.inputs();
      inputs.resize(inputs.size() - sub->captures.size());  // the formal ones (captures came last)
      for (const std::string& c : *caps) {
        auto it = sub->by_name.find(c);
        inputs.push_back(it != sub->by_name.end() ? it->second : sub->g.add_value(c));
      }
      for (ValueId v : inputs) sub->g.value(v).is_graph_input = true;
      sub->g.mutable_inputs() = std::move(inputs);
      Attribute attr;
      attr.kind = Attribute::Kind::kGraph;
      attr.g = std::make_shared<const Graph>(std::move(sub->g));
      (*attrs)[name] = std::move(attr);
    }
    if (!caps->empty()) (*attrs)[std::string(kCapturesAttr)] = int_attr(static_cast<int64_t>(caps->size()));
    return Status::Ok();
  }

  // Every node whose op gpuopt lacks, named in one error (a model is fixed once, not op by op);
  // the error of a single one is the one add_node_proto gives.
  Status check_known_ops(const onnx::GraphProto& gp) {
    std::vector<std::string> unknown;
    const onnx::NodeProto* first = nullptr;
    int first_k = 0;
    for (int k = 0; k < gp.node_size(); ++k) {
      const onnx::NodeProto& np = gp.node(k);
      const bool contrib = is_contrib_op(np.domain(), np.op_type());
      const bool known = np.op_type() == "Constant" || onnx_detail::is_expanded_contrib_op(np.domain(), np.op_type()) ||
                         ((is_default_domain(np.domain()) || contrib) &&
                          (contrib || !is_other_domain_op_name(np.op_type())) && op_from_name(np.op_type()));
      if (known) continue;
      if (!first) {
        first = &np;
        first_k = k;
      }
      const std::string name = np.name().empty() ? fmt::format("{}_{}", np.op_type(), k) : np.name();
      unknown.push_back(fmt::format("'{}'{} at node '{}'", np.op_type(),
                                    is_default_domain(np.domain()) ? "" : fmt::format(" (domain '{}')", np.domain()),
                                    name));
    }
    if (unknown.size() < 2) return first ? add_node_proto(*first, first_k).status() : Status::Ok();
    constexpr size_t kShown = 20;
    std::string list;
    for (size_t i = 0; i < unknown.size() && i < kShown; ++i) list += (i ? ", " : "") + unknown[i];
    if (unknown.size() > kShown) list += fmt::format(" and {} more", unknown.size() - kShown);
    return Status::Unimplemented("{} unknown ops (opset {}): {}: not in gpuopt's op list", unknown.size(), g.opset,
                                 list);
  }

  Status add_nodes(const onnx::GraphProto& gp) {
    GPUOPT_RETURN_IF_ERROR(check_known_ops(gp));
    // ONNX Runtime's contrib attention ops become standard nodes as they are read (contrib_ops.cpp),
    // which needs their inputs' shapes: such a graph is read in dependency order, one node at a time.
    if (onnx_detail::has_expanded_contrib_ops(gp)) return add_nodes_in_order(gp);
    // Pass 1: create every node's outputs, so nodes may come in any order (topo_sort fixes it).
    std::vector<int> node_index(gp.node_size(), -1);
    for (int k = 0; k < gp.node_size(); ++k) {
      GPUOPT_ASSIGN_OR_RETURN(node_index[k], add_node_proto(gp.node(k), k));
    }
    // Pass 2: resolve inputs by name.
    for (int k = 0; k < gp.node_size(); ++k)
      if (node_index[k] >= 0) GPUOPT_RETURN_IF_ERROR(resolve_inputs(gp.node(k), node_index[k]));
    return Status::Ok();
  }

  Status add_nodes_in_order(const onnx::GraphProto& gp) {
    for (int k : onnx_detail::proto_node_order(gp)) {
      const onnx::NodeProto& np = gp.node(k);
      if (!onnx_detail::is_expanded_contrib_op(np.domain(), np.op_type())) {
        GPUOPT_ASSIGN_OR_RETURN(const int index, add_node_proto(np, k));
        if (index < 0) continue;  // a Constant
        GPUOPT_RETURN_IF_ERROR(resolve_inputs(np, index));
        GPUOPT_RETURN_IF_ERROR(onnx_detail::infer_added_node(g, static_cast<size_t>(index)));
        continue;
      }
      onnx_detail::ContribNode c;
      c.op_type = np.op_type();
      c.domain = np.domain();
      c.name = np.name().empty() ? fmt::format("{}_{}", np.op_type(), k) : np.name();
      const std::string where = fmt::format("[{}] node '{}'", np.op_type(), c.name);
      for (const auto& a : np.attribute()) {
        GPUOPT_ASSIGN_OR_RETURN(Attribute attr, convert_attribute(a, where, model_dir));
        c.attrs[a.name()] = std::move(attr);
      }
      for (const std::string& in : np.input()) {
        auto it = in.empty() ? by_name.end() : by_name.find(in);
        if (!in.empty() && it == by_name.end())
          return Status::InvalidArgument("{}: input '{}' is not a graph input, an initializer or the output of any node",
                                         where, in);
        c.inputs.push_back(in.empty() ? kNoValue : it->second);
      }
      c.outputs.assign(np.output().begin(), np.output().end());
      GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueId> outs, onnx_detail::expand_contrib_node(g, c));
      for (size_t i = 0; i < outs.size(); ++i)
        if (outs[i] != kNoValue) GPUOPT_RETURN_IF_ERROR(add_named(c.outputs[i], outs[i], where));
    }
    return Status::Ok();
  }

  // A node's op, attributes and outputs (its inputs come from resolve_inputs): the node's index,
  // or -1 for a Constant (which becomes a constant value).
  Result<int> add_node_proto(const onnx::NodeProto& np, int k) {
    const std::string name = np.name().empty() ? fmt::format("{}_{}", np.op_type(), k) : np.name();
    const std::string where = fmt::format("[{}] node '{}'", np.op_type(), name);
    const bool contrib = is_contrib_op(np.domain(), np.op_type());
    if (!is_default_domain(np.domain()) && !contrib) {
      int64_t version = -1;
      for (const auto& o : model.opset_import())
        if (o.domain() == np.domain()) version = o.version();
      return Status::Unimplemented("unknown op '{}' (domain '{}', opset {}) at node '{}': gpuopt implements only the "
                                   "default ONNX domain",
                                   np.op_type(), np.domain(), version, name);
    }
    if (np.op_type() == "Constant") {
      if (np.output_size() != 1) return Status::InvalidArgument("{}: a Constant node has exactly one output", where);
      GPUOPT_ASSIGN_OR_RETURN(Tensor t, constant_node_value(np, where, model_dir));
      ValueId id = g.add_constant(np.output(0), std::move(t));
      GPUOPT_RETURN_IF_ERROR(add_named(np.output(0), id, where));
      return -1;
    }
    const std::optional<Op> op =
        contrib || !is_other_domain_op_name(np.op_type()) ? op_from_name(np.op_type()) : std::nullopt;
    if (!op)
      return Status::Unimplemented("unknown op '{}' (domain 'ai.onnx', opset {}) at node '{}': not in gpuopt's op list",
                                   np.op_type(), g.opset, name);
    AttributeMap attrs;
    std::vector<std::string> caps;
    GPUOPT_RETURN_IF_ERROR(add_subgraphs(np, where, &attrs, &caps));
    for (const auto& a : np.attribute()) {
      if (attrs.count(a.name())) continue;  // a subgraph
      if (a.name() == kCapturesAttr) continue;  // the importer's own, never the model's
      GPUOPT_ASSIGN_OR_RETURN(Attribute attr, convert_attribute(a, where, model_dir));
      attrs[a.name()] = std::move(attr);
    }
    int num_out = np.output_size();
    while (num_out > 0 && np.output(num_out - 1).empty()) --num_out;  // trailing optional outputs not requested
    std::vector<std::string> out_names(np.output().begin(), np.output().begin() + num_out);
    std::vector<ValueId> outs = g.add_node(*op, name, {}, static_cast<size_t>(num_out), std::move(attrs), out_names);
    Node& node = g.nodes().back();
    node.op_type = np.op_type();
    node.domain = np.domain();
    // The op's version for this model's opset (ops_versions.inc): none is one clear error.
    GPUOPT_RETURN_IF_ERROR(node_version(node, g.opset_for(node)).status());
    for (int i = 0; i < num_out; ++i) {
      if (out_names[i].empty()) {
        node.outputs[i] = kNoValue;  // the fresh value stays unused
        continue;
      }
      GPUOPT_RETURN_IF_ERROR(add_named(out_names[i], outs[i], where));
    }
    const int index = static_cast<int>(g.nodes().size() - 1);
    if (!caps.empty()) node_captures[index] = std::move(caps);
    return index;
  }

  Status resolve_inputs(const onnx::NodeProto& np, int index) {
    Node& node = g.nodes()[static_cast<size_t>(index)];
    int num_in = np.input_size();
    while (num_in > 0 && np.input(num_in - 1).empty()) --num_in;
    for (int i = 0; i < num_in; ++i) {
      const std::string& in = np.input(i);
      if (in.empty()) {
        node.inputs.push_back(kNoValue);
        continue;
      }
      GPUOPT_ASSIGN_OR_RETURN(const ValueId id, resolve_name(in, node_label(node)));
      g.nodes()[static_cast<size_t>(index)].inputs.push_back(id);
    }
    // The outer values its subgraphs read: after its own inputs, absent ones padded first.
    if (auto it = node_captures.find(index); it != node_captures.end()) {
      const size_t own = static_cast<size_t>(np.input_size());
      while (g.nodes()[static_cast<size_t>(index)].inputs.size() < own)
        g.nodes()[static_cast<size_t>(index)].inputs.push_back(kNoValue);
      for (const std::string& c : it->second) {
        GPUOPT_ASSIGN_OR_RETURN(const ValueId id, resolve_name(c, node_label(g.nodes()[static_cast<size_t>(index)])));
        g.nodes()[static_cast<size_t>(index)].inputs.push_back(id);
      }
    }
    return Status::Ok();
  }
};

// Protobuf prints parse problems to stderr itself; route them to our log at debug level so the
// user sees one clear error line from us instead.
void quiet_protobuf_logs() {
  static const bool once = [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char* file, int line, const std::string& msg) {
      GPUOPT_LOG(debug, "protobuf {}:{}: {}", file, line, msg);
    });
    return true;
  }();
  (void)once;
}

Result<Graph> finish(const onnx::ModelProto& model, const std::string& model_dir, const ImportOptions& options) {
  if (!model.has_graph())
    return Status::InvalidArgument("not an ONNX model: it has no graph (empty, truncated or not a model file)");
  return import_onnx_model(model, model_dir, options);
}

}  // namespace

Result<Graph> import_onnx_model(const onnx::ModelProto& model, const std::string& model_dir, const ImportOptions& options) {
  Importer imp{model, model_dir, Graph{}, {}, false, {}, {}};
  GPUOPT_RETURN_IF_ERROR(imp.run());
  if (options.infer_shapes) GPUOPT_RETURN_IF_ERROR(imp.g.infer_shapes());
  return std::move(imp.g);
}

Result<Graph> load_onnx_model_from_bytes(const void* data, size_t size, const std::string& model_dir,
                                         const ImportOptions& options) {
  quiet_protobuf_logs();
  if (size > static_cast<size_t>(INT_MAX))
    return Status::InvalidArgument("model of {} bytes is over protobuf's 2 GiB limit (keep weights as external data)", size);
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream stream(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream coded(&stream);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    return Status::InvalidArgument("not a valid ONNX model: protobuf parsing failed (truncated or corrupt data)");
  return finish(model, model_dir, options);
}

Result<Graph> load_onnx_model(const std::string& path, const ImportOptions& options) {
  quiet_protobuf_logs();
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return Status::NotFound("model file '{}' cannot be read: {}", path, ec.message());
  if (size > static_cast<uintmax_t>(INT_MAX))
    return Status::InvalidArgument("model file '{}' is {} bytes, over protobuf's 2 GiB limit (keep weights as external data)",
                                   path, size);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("model file '{}' cannot be opened", path);
  onnx::ModelProto model;
  bool ok;
  {
    google::protobuf::io::FileInputStream stream(fd);
    stream.SetCloseOnDelete(true);
    google::protobuf::io::CodedInputStream coded(&stream);
    coded.SetTotalBytesLimit(INT_MAX);
    ok = model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  }
  if (!ok)
    return Status::InvalidArgument("'{}' is not a valid ONNX model: protobuf parsing failed (truncated or corrupt file)",
                                   path);
  const std::string parent = fs::path(path).parent_path().string();
  const std::string dir = parent.empty() ? std::string(".") : parent;
  auto g = finish(model, dir, options);
  if (!g.ok()) return g.status().with_context(fmt::format("loading '{}'", path));
  return g;
}

}  // namespace gpuopt
