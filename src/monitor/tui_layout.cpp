#include "monitor/tui_layout.h"

#include "core/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpuopt::gpu {

Screen::Screen(int w, int h) : width(std::max(w, 1)), height(std::max(h, 1)) {
  rows.assign(height, std::string(width, ' '));
  colors.assign(height, std::vector<Color>(width, Color::kNormal));
}

void Screen::put(int row, int col, std::string_view s, Color c) {
  if (row < 0 || row >= height) return;
  for (size_t i = 0; i < s.size(); ++i) {
    int x = col + int(i);
    if (x < 0) continue;
    if (x >= width) break;
    char ch = s[i];
    rows[row][x] = (ch >= 32 && ch < 127) ? ch : '?';  // ASCII only: anything else would misalign
    colors[row][x] = c;
  }
}

std::string Screen::text() const {
  std::string out;
  for (const auto& r : rows) out += r + "\n";
  return out;
}

std::string bar(std::optional<double> fraction, int width) {
  int inner = std::max(width - 2, 1);
  std::string s(inner, ' ');
  if (fraction) {
    int n = int(std::lround(std::clamp(*fraction, 0.0, 1.0) * inner));
    std::fill(s.begin(), s.begin() + n, '|');
  } else if (inner >= 3) {
    s.replace(inner / 2 - 1, 3, "n/a");
  }
  return "[" + s + "]";
}

std::string sparkline(const std::deque<double>& values, int width) {
  static const char kLevels[] = " .:-=+*#%@";
  std::string s(std::max(width, 0), ' ');
  int n = std::min<int>(width, int(values.size()));
  for (int i = 0; i < n; ++i) {
    double v = values[values.size() - n + i];
    int lvl = v < 0 ? -1 : std::clamp(int(std::ceil(v / 100.0 * 9)), 0, 9);
    s[width - n + i] = lvl < 0 ? '?' : kLevels[lvl];
  }
  return s;
}

void MonitorView::update(const Snapshot& s, std::vector<Finding> findings) {
  snap_ = s;
  findings_ = std::move(findings);
  if (util_history_.size() != s.gpus.size()) {
    util_history_.assign(s.gpus.size(), {});
    mem_history_.assign(s.gpus.size(), {});
  }
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    const GpuSample& g = s.gpus[i];
    util_history_[i].push_back(g.gpu_util_pct ? double(*g.gpu_util_pct) : -1.0);
    auto f = memory_used_fraction(g);
    mem_history_[i].push_back(f ? *f * 100 : -1.0);
    if (util_history_[i].size() > kHistory) util_history_[i].pop_front();
    if (mem_history_[i].size() > kHistory) mem_history_[i].pop_front();
  }
}

std::vector<std::pair<unsigned, const ProcessSample*>> sorted_processes(const Snapshot& s, ProcessSort sort) {
  std::vector<std::pair<unsigned, const ProcessSample*>> out;
  for (const auto& g : s.gpus)
    for (const auto& p : g.processes) out.emplace_back(g.info ? g.info->index : 0, &p);
  std::stable_sort(out.begin(), out.end(), [sort](const auto& a, const auto& b) {
    if (sort == ProcessSort::kUtilization) {
      long ua = a.second->sm_util_pct ? long(*a.second->sm_util_pct) : -1;
      long ub = b.second->sm_util_pct ? long(*b.second->sm_util_pct) : -1;
      if (ua != ub) return ua > ub;
    }
    uint64_t ma = a.second->gpu_memory_bytes.value_or(0), mb = b.second->gpu_memory_bytes.value_or(0);
    if (ma != mb) return ma > mb;
    return a.second->pid < b.second->pid;
  });
  return out;
}

namespace {

Color util_color(std::optional<double> f) {
  if (!f) return Color::kDim;
  return *f >= 0.8 ? Color::kGood : *f >= 0.4 ? Color::kWarn : Color::kBad;
}

Color severity_color(Severity s) {
  return s == Severity::kCritical ? Color::kBad : s == Severity::kWarning ? Color::kWarn : Color::kGood;
}

std::string gib(std::optional<uint64_t> b) {
  return b ? fmt::format("{:.1f}", double(*b) / double(1ull << 30)) : std::string("n/a");
}

// "PWR-CAP THERMAL" style flags for the clock-event reasons that slow a GPU down.
std::string throttle_flags(const GpuSample& g) {
  if (!g.clock_event_reasons) return "";
  uint64_t m = *g.clock_event_reasons;
  std::string f;
  if (m & kClockEventSwPowerCap) f += " PWR-CAP";
  if (m & (kClockEventHwPowerBrake | kClockEventHwSlowdown)) f += " HW-SLOW";
  if (m & (kClockEventSwThermal | kClockEventHwThermal)) f += " THERMAL";
  return f;
}

std::string pct(std::optional<double> frac) {
  return frac ? fmt::format("{:.0f}%", *frac * 100) : std::string("n/a");
}

}  // namespace

Screen MonitorView::render(int width, int height, const ViewOptions& o) const {
  Screen sc(width, height);
  int W = sc.width, H = sc.height;
  int row = 0;
  sc.put(row, 0, std::string(W, ' '), Color::kHeader);
  sc.put(row++, 0, fmt::format("gpuopt monitor  {}", o.title), Color::kHeader);

  const size_t n = snap_.gpus.size();
  if (n == 0) {
    sc.put(row++, 0, "no GPU to show", Color::kWarn);
  }
  // Full panels (3 rows) when they leave room for a few processes and findings, else 1 row each.
  bool compact = 1 + int(n) * 3 + 8 > H;
  int gpu_rows_max = H - 1 - 6;  // keep the process header, a process, diagnosis and help visible
  int shown = 0;
  for (size_t i = 0; i < n; ++i) {
    const GpuSample& g = snap_.gpus[i];
    const DeviceInfo empty;
    const DeviceInfo& info = g.info ? *g.info : empty;
    int need = compact ? 1 : 3;
    if (row + need > 1 + std::max(gpu_rows_max, need)) break;
    std::optional<double> uf = g.gpu_util_pct ? std::optional<double>(*g.gpu_util_pct / 100.0) : std::nullopt;
    std::optional<double> mf = memory_used_fraction(g);
    std::string mem = fmt::format("{}/{}G", gib(g.mem_used_bytes), gib(g.mem_total_bytes));
    if (g.lost) {
      sc.put(row, 0, fmt::format("GPU {} {}", info.index, info.name));
      sc.put(row, 30, "LOST: not answering NVML", Color::kBad);
      row += need;
      ++shown;
      continue;
    }
    std::string temp = g.temp_gpu_c ? fmt::format("{}C", *g.temp_gpu_c) : "n/a";
    std::string power = fmt::format("{}/{}W", g.power_w ? fmt::format("{:.0f}", *g.power_w) : "n/a",
                                    g.power_limit_w ? fmt::format("{:.0f}", *g.power_limit_w) : "n/a");
    if (compact) {
      int bw = std::max(8, (W - 52) / 2);
      sc.put(row, 0, fmt::format("{:>2} ", info.index));
      sc.put(row, 3, bar(uf, bw), util_color(uf));
      sc.put(row, 3 + bw, fmt::format("{:>4}", g.gpu_util_pct ? fmt::format("{}%", *g.gpu_util_pct) : "n/a"));
      sc.put(row, 8 + bw, bar(mf, bw), util_color(mf ? std::optional<double>(1 - *mf) : std::nullopt));
      sc.put(row, 8 + 2 * bw, fmt::format(" {:<14} {:>4} {:>9}", mem, temp, power));
      sc.put(row, 8 + 2 * bw + 31, throttle_flags(g), Color::kWarn);
      ++row;
      ++shown;
      continue;
    }
    // Row 1: identity and the slow-moving numbers.
    std::string clocks = fmt::format("SM {}/{}MHz", g.sm_clock_mhz ? std::to_string(*g.sm_clock_mhz) : "n/a",
                                     info.sm_clock_max_mhz ? std::to_string(*info.sm_clock_max_mhz) : "n/a");
    sc.put(row, 0, fmt::format("GPU {} {}", info.index, info.name), Color::kHeader);
    std::string right = fmt::format("{} {} {}", temp, power, clocks);
    std::string flags = throttle_flags(g);
    int rx = std::max(0, W - int(right.size()) - int(flags.size()));
    sc.put(row, std::max(rx, 24), right);
    sc.put(row, std::max(rx, 24) + int(right.size()), flags, Color::kWarn);
    ++row;
    // Row 2: utilisation and memory bars.
    int bw = std::max(10, (W - 38) / 2);
    int x = 0;
    sc.put(row, x, " UTIL ");
    x += 6;
    sc.put(row, x, bar(uf, bw), util_color(uf));
    x += bw;
    sc.put(row, x, fmt::format(" {:>4}", g.gpu_util_pct ? fmt::format("{}%", *g.gpu_util_pct) : "n/a"));
    x += 5;
    sc.put(row, x, "  MEM ");
    x += 6;
    sc.put(row, x, bar(mf, bw), mf && *mf > 0.9 ? Color::kBad : Color::kNormal);
    x += bw;
    sc.put(row, x, " " + mem);
    ++row;
    // Row 3: utilisation history, then PCIe and GPM activity.
    std::string tail;
    if (g.gpm.pcie_tx_bytes_per_s || g.pcie_tx_kbps) {
      double tx = g.gpm.pcie_tx_bytes_per_s ? *g.gpm.pcie_tx_bytes_per_s : double(*g.pcie_tx_kbps) * 1024;
      double rx = g.gpm.pcie_rx_bytes_per_s ? *g.gpm.pcie_rx_bytes_per_s : double(g.pcie_rx_kbps.value_or(0)) * 1024;
      tail += fmt::format(" PCIe tx {:.1f} rx {:.1f} GB/s", tx / 1e9, rx / 1e9);
    } else {
      tail += " PCIe n/a";
    }
    if (info.gpm_supported)
      tail += fmt::format(" SM {} TC {} DRAM {}", pct(g.gpm.sm_active), pct(g.gpm.tensor_active), pct(g.gpm.dram_active));
    int hw = std::max(8, W - 6 - int(tail.size()));
    sc.put(row, 0, " hist ", Color::kDim);
    sc.put(row, 6, sparkline(i < util_history_.size() ? util_history_[i] : std::deque<double>{}, hw - 1), Color::kGood);
    sc.put(row, 5 + hw, tail);
    ++row;
    ++shown;
  }
  if (shown < int(n)) sc.put(row++, 0, fmt::format("... {} more GPU(s): enlarge the terminal", int(n) - shown), Color::kDim);

  // Bottom-up: help line, diagnosis lines, then the process table takes what is left.
  int help_row = H - 1;
  sc.put(help_row, 0, std::string(W, ' '), Color::kHeader);
  sc.put(help_row, 0,
         fmt::format("q quit  m sort by memory  u sort by util   sorted by {}   n/a: not reported",
                     o.sort == ProcessSort::kMemory ? "memory" : "util"),
         Color::kHeader);
  // Diagnosis gets two lines per finding (what, then the advice) when the processes still fit,
  // else one line each; the process table takes the rest.
  auto procs = sorted_processes(snap_, o.sort);
  int nf = int(findings_.size());
  int proc_want = 1 + std::max(1, int(procs.size()));
  int room = help_row - row - 1;  // below the GPU panels, above the help line, minus "DIAGNOSIS"
  int per = (room - proc_want >= 2 * nf) ? 2 : 1;
  int diag_lines = std::clamp(std::min(nf * per, room - std::min(proc_want, 2)), 1, std::max(1, nf * per));
  int diag_top = help_row - diag_lines - 1;
  if (diag_top > row) {
    sc.put(diag_top, 0, "DIAGNOSIS", Color::kHeader);
    if (findings_.empty()) {
      sc.put(diag_top + 1, 1,
             snap_.sequence < 2 ? "collecting samples..." : "no bottleneck found in the sample window", Color::kGood);
    }
    int line = diag_top + 1;
    for (int k = 0; k < nf && line < help_row; ++k) {
      const Finding& f = findings_[k];
      char mark = f.severity == Severity::kCritical ? '!' : f.severity == Severity::kWarning ? '*' : '-';
      if (per == 2) {
        sc.put(line++, 1, fmt::format("{} GPU {} {}: {}", mark, f.gpu, f.title, f.detail), severity_color(f.severity));
        if (line < help_row) sc.put(line++, 3, "-> " + f.advice);
      } else {
        sc.put(line++, 1, fmt::format("{} GPU {} {}: {} -> {}", mark, f.gpu, f.title, f.detail, f.advice),
               severity_color(f.severity));
      }
    }
  } else {
    diag_top = help_row;
  }

  if (row < diag_top) {
    sc.put(row++, 0, fmt::format("{:>3} {:>7} {:<10} {:>9} {:>4} {}", "GPU", "PID", "USER", "GPU-MEM", "SM%", "COMMAND"),
           Color::kHeader);
    bool any_list = std::any_of(snap_.gpus.begin(), snap_.gpus.end(), [](const GpuSample& g) { return g.processes_available; });
    if (procs.empty() && row < diag_top)
      sc.put(row++, 1, any_list ? "no processes on the GPU(s)" : "process list not available from the driver", Color::kDim);
    for (size_t k = 0; k < procs.size() && row < diag_top; ++k) {
      const auto& [gi, p] = procs[k];
      if (row == diag_top - 1 && k + 1 < procs.size()) {
        sc.put(row++, 1, fmt::format("... {} more", procs.size() - k), Color::kDim);
        break;
      }
      std::string memtxt = p->gpu_memory_bytes ? fmt::format("{:.0f}MiB", double(*p->gpu_memory_bytes) / (1 << 20)) : "n/a";
      sc.put(row++, 0,
             fmt::format("{:>3} {:>7} {:<10.10} {:>9} {:>4} {}", gi, p->pid, p->user[0] ? p->user : "?", memtxt,
                         p->sm_util_pct ? std::to_string(*p->sm_util_pct) : "n/a", p->command));
    }
  }
  return sc;
}

std::string render_once(const Snapshot& s, const std::vector<Finding>& findings, ProcessSort sort) {
  std::string out;
  Table t({"GPU", "name", "util", "mem util", "memory used/total", "temp", "power/limit", "SM clock", "PCIe tx/rx",
           "throttle"});
  for (const GpuSample& g : s.gpus) {
    const DeviceInfo empty;
    const DeviceInfo& i = g.info ? *g.info : empty;
    if (g.lost) {
      t.add({std::to_string(i.index), i.name, "lost", "", "", "", "", "", "", ""});
      continue;
    }
    std::string reasons = "n/a";
    if (g.clock_event_reasons) {
      reasons.clear();
      for (const auto& r : kClockEventReasons)
        if (*g.clock_event_reasons & r.bit) reasons += (reasons.empty() ? "" : ",") + std::string(r.name);
      if (reasons.empty()) reasons = "none";
    }
    std::string pcie = "n/a";
    if (g.gpm.pcie_tx_bytes_per_s && g.gpm.pcie_rx_bytes_per_s)
      pcie = fmt::format("{:.2f}/{:.2f} GB/s", *g.gpm.pcie_tx_bytes_per_s / 1e9, *g.gpm.pcie_rx_bytes_per_s / 1e9);
    else if (g.pcie_tx_kbps && g.pcie_rx_kbps)
      pcie = fmt::format("{:.2f}/{:.2f} GB/s", *g.pcie_tx_kbps * 1024.0 / 1e9, *g.pcie_rx_kbps * 1024.0 / 1e9);
    t.add({std::to_string(i.index), i.name, na_or(g.gpu_util_pct, "%"), na_or(g.mem_util_pct, "%"),
           fmt::format("{} / {} GiB", gib(g.mem_used_bytes), gib(g.mem_total_bytes)), na_or(g.temp_gpu_c, " C"),
           fmt::format("{} / {} W", na_or(g.power_w, 0), na_or(g.power_limit_w, 0)),
           fmt::format("{} / {} MHz", na_or(g.sm_clock_mhz), na_or(i.sm_clock_max_mhz)), pcie, reasons});
  }
  out += s.gpus.empty() ? "no GPU\n" : t.render();
  bool gpm = std::any_of(s.gpus.begin(), s.gpus.end(), [](const GpuSample& g) { return g.info && g.info->gpm_supported; });
  if (gpm) {
    Table gt({"GPU", "SM active", "SM occupancy", "tensor active", "DRAM active", "FP32 active", "FP16 active"});
    for (const GpuSample& g : s.gpus)
      gt.add({std::to_string(g.info ? g.info->index : 0), pct(g.gpm.sm_active), pct(g.gpm.sm_occupancy),
              pct(g.gpm.tensor_active), pct(g.gpm.dram_active), pct(g.gpm.fp32_active), pct(g.gpm.fp16_active)});
    out += "\n" + gt.render();
  }
  Table et({"GPU", "ECC corrected/uncorrected (volatile)", "XID events", "last XID", "PCIe replays", "MIG"});
  for (const GpuSample& g : s.gpus)
    et.add({std::to_string(g.info ? g.info->index : 0),
            g.ecc_corrected_volatile ? fmt::format("{} / {}", *g.ecc_corrected_volatile, g.ecc_uncorrected_volatile.value_or(0)) : "n/a",
            g.xid_count ? std::to_string(*g.xid_count) : "n/a", g.last_xid ? std::to_string(*g.last_xid) : "none",
            g.pcie_replay_count ? std::to_string(*g.pcie_replay_count) : "n/a",
            g.mig_enabled ? (*g.mig_enabled ? fmt::format("on ({} devices)", g.mig_device_count.value_or(0)) : "off") : "n/a"});
  if (!s.gpus.empty()) out += "\n" + et.render();

  auto procs = sorted_processes(s, sort);
  if (!procs.empty()) {
    Table pt({"GPU", "PID", "user", "GPU memory", "SM %", "container", "command"});
    for (const auto& [gi, p] : procs)
      pt.add({std::to_string(gi), std::to_string(p->pid), p->user[0] ? p->user : "?",
              p->gpu_memory_bytes ? format_bytes(double(*p->gpu_memory_bytes)) : "n/a", na_or(p->sm_util_pct),
              p->container_id[0] ? std::string(p->container_id).substr(0, 12) : "-", p->command});
    out += "\n" + pt.render();
  } else if (!s.gpus.empty()) {
    out += "\nno processes on the GPU(s)\n";
  }
  out += "\nDiagnosis:\n";
  if (findings.empty()) out += "  no bottleneck found (one snapshot; `gpuopt monitor` watches a 30 s window)\n";
  for (const Finding& f : findings)
    out += fmt::format("  [{}] GPU {} {}: {}\n      -> {}\n", severity_name(f.severity), f.gpu, f.title, f.detail,
                       f.advice);
  return out;
}

}  // namespace gpuopt::gpu
