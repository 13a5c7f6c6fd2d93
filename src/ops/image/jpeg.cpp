// Baseline JPEG decoder (see misc_jpeg.h). Follows libjpeg(-turbo)'s integer paths step for step
// so that the node tests' expected pixels (decoded by Pillow, i.e. libjpeg-turbo) match exactly:
// jidctint.c's jpeg_idct_islow, jdsample.c's h2v1/h2v2 fancy upsampling and jdcolor.c's
// ycc_rgb_convert tables.
#include "ops/image/jpeg.h"

#include <algorithm>
#include <array>

namespace gpuopt::jpeg {

namespace {

struct HuffTable {
  std::array<int, 17> counts{};  // codes per length 1..16
  std::vector<uint8_t> symbols;
  bool present = false;
};

struct Component {
  int id = 0, h = 1, v = 1, tq = 0, td = 0, ta = 0;
  int bw = 0, bh = 0;          // blocks per line / column (padded to whole MCUs)
  std::vector<uint8_t> plane;  // bw*8 x bh*8 samples
  int dc_pred = 0;
};

class Reader {
 public:
  Reader(const std::vector<uint8_t>& d, size_t pos) : d_(d), pos_(pos) {}
  // Next bit of entropy-coded data: 0xFF00 is a stuffed 0xFF; a marker ends the data (zeros follow).
  int bit() {
    if (nbits_ == 0) {
      if (pos_ >= d_.size()) return 0;
      uint8_t b = d_[pos_];
      if (b == 0xFF) {
        const uint8_t n = pos_ + 1 < d_.size() ? d_[pos_ + 1] : 0;
        if (n == 0x00) {
          pos_ += 2;
        } else {
          marker_hit_ = true;
          b = 0;
        }
      } else {
        ++pos_;
      }
      if (marker_hit_) b = 0;
      cur_ = b;
      nbits_ = 8;
    }
    --nbits_;
    return (cur_ >> nbits_) & 1;
  }
  int bits(int n) {
    int v = 0;
    for (int i = 0; i < n; ++i) v = (v << 1) | bit();
    return v;
  }
  // At a restart interval's end: drop the partial byte and skip the RSTn marker.
  void restart() {
    nbits_ = 0;
    marker_hit_ = false;
    while (pos_ + 1 < d_.size() && !(d_[pos_] == 0xFF && d_[pos_ + 1] >= 0xD0 && d_[pos_ + 1] <= 0xD7)) ++pos_;
    if (pos_ + 1 < d_.size()) pos_ += 2;
  }
  Result<int> decode(const HuffTable& t) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= 16; ++len) {
      code |= bit();
      const int c = t.counts[len];
      if (code - c < first) {
        // A table whose counts over-fill the code space (hostile DHT) can leave code below first.
        if (code < first) break;
        return static_cast<int>(t.symbols[static_cast<size_t>(index + (code - first))]);
      }
      index += c;
      first = (first + c) << 1;
      code <<= 1;
    }
    return Status::InvalidArgument("JPEG entropy data has an invalid Huffman code");
  }

 private:
  const std::vector<uint8_t>& d_;
  size_t pos_;
  int nbits_ = 0;
  uint8_t cur_ = 0;
  bool marker_hit_ = false;
};

int extend(int v, int t) { return t == 0 ? 0 : (v < (1 << (t - 1)) ? v - (1 << t) + 1 : v); }

constexpr int kZigzag[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
                             41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
                             30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

// jidctint.c jpeg_idct_islow: 13-bit fixed-point constants, PASS1_BITS 2; coef already dequantized.
constexpr int kIdctConst = 13, kIdctPass1 = 2;

// One 8-point pass of the islow IDCT, the same butterfly for columns and rows: x[k] is the k-th
// input of the line, y[k] the k-th output before descaling.
void idct8(const int64_t x[8], int64_t y[8]) {
  constexpr int64_t F0298 = 2446, F0390 = 3196, F0541 = 4433, F0765 = 6270, F0899 = 7373, F1175 = 9633, F1501 = 12299,
                    F1847 = 15137, F1961 = 16069, F2053 = 16819, F2562 = 20995, F3072 = 25172;
  // Even part.
  const int64_t z1 = (x[2] + x[6]) * F0541;
  const int64_t e2 = z1 + x[6] * (-F1847), e3 = z1 + x[2] * F0765;
  const int64_t e0 = (x[0] + x[4]) * (int64_t{1} << kIdctConst), e1 = (x[0] - x[4]) * (int64_t{1} << kIdctConst);
  const int64_t t10 = e0 + e3, t13 = e0 - e3, t11 = e1 + e2, t12 = e1 - e2;
  // Odd part.
  int64_t o0 = x[7], o1 = x[5], o2 = x[3], o3 = x[1];
  int64_t a1 = o0 + o3, a2 = o1 + o2, a3 = o0 + o2, a4 = o1 + o3;
  const int64_t z5 = (a3 + a4) * F1175;
  o0 *= F0298;
  o1 *= F2053;
  o2 *= F3072;
  o3 *= F1501;
  a1 *= -F0899;
  a2 *= -F2562;
  a3 = a3 * -F1961 + z5;
  a4 = a4 * -F0390 + z5;
  o0 += a1 + a3;
  o1 += a2 + a4;
  o2 += a2 + a3;
  o3 += a1 + a4;
  y[0] = t10 + o3;
  y[7] = t10 - o3;
  y[1] = t11 + o2;
  y[6] = t11 - o2;
  y[2] = t12 + o1;
  y[5] = t12 - o1;
  y[3] = t13 + o0;
  y[4] = t13 - o0;
}

void idct_islow(const int* in, uint8_t* out, int stride) {
  auto descale = [](int64_t x, int n) { return static_cast<int>((x + (int64_t{1} << (n - 1))) >> n); };
  int ws[64];
  int64_t x[8], y[8];
  for (int c = 0; c < 8; ++c) {  // columns, into ws with PASS1_BITS of extra precision
    const int* p = in + c;
    if (!p[8] && !p[16] && !p[24] && !p[32] && !p[40] && !p[48] && !p[56]) {
      const int dc = p[0] * (1 << kIdctPass1);
      for (int r = 0; r < 8; ++r) ws[r * 8 + c] = dc;
      continue;
    }
    for (int k = 0; k < 8; ++k) x[k] = p[k * 8];
    idct8(x, y);
    for (int k = 0; k < 8; ++k) ws[k * 8 + c] = descale(y[k], kIdctConst - kIdctPass1);
  }
  auto clamp = [](int v) { return static_cast<uint8_t>(std::min(255, std::max(0, v + 128))); };
  for (int r = 0; r < 8; ++r) {  // rows, to pixels
    const int* w = ws + r * 8;
    uint8_t* o = out + r * stride;
    if (!w[1] && !w[2] && !w[3] && !w[4] && !w[5] && !w[6] && !w[7]) {
      const uint8_t v = clamp(descale(w[0], kIdctPass1 + 3));
      for (int c = 0; c < 8; ++c) o[c] = v;
      continue;
    }
    for (int k = 0; k < 8; ++k) x[k] = w[k];
    idct8(x, y);
    for (int k = 0; k < 8; ++k) o[k] = clamp(descale(y[k], kIdctConst + kIdctPass1 + 3));
  }
}

// One chroma row (width cw) upsampled 2x horizontally with the triangle filter, from column sums
// (jdsample.c); `sum` holds 3*near + far (h2v2) or 4*near (h2v1, for which the result equals
// libjpeg's h2v1 filter scaled by 4).
void fancy_row(const std::vector<int>& sum, int cw, uint8_t* out, int shift, int bias_a, int bias_b) {
  if (cw == 1) {
    out[0] = out[1] = static_cast<uint8_t>((sum[0] * 4 + bias_a) >> shift);
    return;
  }
  out[0] = static_cast<uint8_t>((sum[0] * 4 + bias_a) >> shift);
  out[1] = static_cast<uint8_t>((sum[0] * 3 + sum[1] + bias_b) >> shift);
  for (int x = 1; x < cw - 1; ++x) {
    out[2 * x] = static_cast<uint8_t>((sum[x] * 3 + sum[x - 1] + bias_a) >> shift);
    out[2 * x + 1] = static_cast<uint8_t>((sum[x] * 3 + sum[x + 1] + bias_b) >> shift);
  }
  out[2 * cw - 2] = static_cast<uint8_t>((sum[cw - 1] * 3 + sum[cw - 2] + bias_a) >> shift);
  out[2 * cw - 1] = static_cast<uint8_t>((sum[cw - 1] * 4 + bias_b) >> shift);
}

}  // namespace

Status decode(const std::vector<uint8_t>& d, int64_t* height, int64_t* width, std::vector<uint8_t>* rgb) {
  std::array<std::array<int, 64>, 4> qt{};
  std::array<HuffTable, 4> dc_t, ac_t;
  std::vector<Component> comps;
  int W = 0, H = 0, restart = 0;
  size_t i = 2;
  auto u16 = [&](size_t p) { return (d[p] << 8) | d[p + 1]; };
  while (true) {
    while (i < d.size() && d[i] != 0xFF) ++i;
    while (i < d.size() && d[i] == 0xFF) ++i;
    if (i >= d.size()) return Status::InvalidArgument("JPEG data ends before the scan");
    const uint8_t m = d[i++];
    if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) continue;
    if (m == 0xD9) return Status::InvalidArgument("JPEG has no scan");
    if (i + 2 > d.size()) return Status::InvalidArgument("JPEG marker segment is truncated");
    const size_t len = u16(i);
    if (len < 2 || i + len > d.size()) return Status::InvalidArgument("JPEG marker segment is truncated");
    const size_t s = i + 2, e = i + len;
    if (m == 0xDB) {
      for (size_t p = s; p < e;) {
        const int pq = d[p] >> 4, tq = d[p] & 3;
        ++p;
        for (int k = 0; k < 64; ++k) {
          if (p + (pq ? 2 : 1) > e) return Status::InvalidArgument("JPEG quantization table is truncated");
          qt[tq][kZigzag[k]] = pq ? u16(p) : d[p];
          p += pq ? 2 : 1;
        }
      }
    } else if (m == 0xC4) {
      for (size_t p = s; p < e;) {
        const int tc = d[p] >> 4, th = d[p] & 3;
        HuffTable& t = tc ? ac_t[th] : dc_t[th];
        t = HuffTable{};
        int total = 0;
        if (p + 17 > e) return Status::InvalidArgument("JPEG Huffman table is truncated");
        for (int l = 1; l <= 16; ++l) total += t.counts[l] = d[p + l];
        p += 17;
        if (p + total > e) return Status::InvalidArgument("JPEG Huffman table is truncated");
        t.symbols.assign(d.begin() + static_cast<std::ptrdiff_t>(p), d.begin() + static_cast<std::ptrdiff_t>(p + total));
        t.present = true;
        p += total;
      }
    } else if (m == 0xC0 || m == 0xC1) {
      if (len < 8 || d[s] != 8) return Status::Unimplemented("JPEG with {}-bit samples is not supported (8)", len < 8 ? 0 : d[s]);
      H = u16(s + 1);
      W = u16(s + 3);
      const int n = d[s + 5];
      if (n != 1 && n != 3) return Status::Unimplemented("JPEG with {} components is not supported (1 or 3)", n);
      if (len < 8 + 3 * static_cast<size_t>(n)) return Status::InvalidArgument("JPEG frame header is truncated");
      for (int k = 0; k < n; ++k) {
        Component c;
        c.id = d[s + 6 + 3 * k];
        c.h = d[s + 7 + 3 * k] >> 4;
        c.v = d[s + 7 + 3 * k] & 15;
        c.tq = d[s + 8 + 3 * k] & 3;
        if (c.h < 1 || c.h > 2 || c.v < 1 || c.v > 2) return Status::Unimplemented("JPEG sampling factors {}x{} are not supported", c.h, c.v);
        comps.push_back(c);
      }
    } else if (m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      return Status::Unimplemented("{} JPEG (SOF{}) is not supported (baseline only)",
                                   m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE ? "progressive" : "lossless or arithmetic-coded", m - 0xC0);
    } else if (m == 0xDD) {
      restart = u16(s);
    } else if (m == 0xDA) {
      if (comps.empty()) return Status::InvalidArgument("JPEG scan comes before the frame header");
      const int ns = d[s];
      if (ns != static_cast<int>(comps.size())) return Status::Unimplemented("JPEG with a non-interleaved scan is not supported");
      for (int k = 0; k < ns; ++k) {
        const int cid = d[s + 1 + 2 * k];
        auto it = std::find_if(comps.begin(), comps.end(), [&](const Component& c) { return c.id == cid; });
        if (it == comps.end()) return Status::InvalidArgument("JPEG scan names unknown component {}", cid);
        it->td = d[s + 2 + 2 * k] >> 4;  // 0-15 in the byte; a baseline decoder has tables 0-3
        it->ta = d[s + 2 + 2 * k] & 3;
        if (it->td > 3) return Status::InvalidArgument("JPEG scan uses DC Huffman table {} (0-3 exist)", it->td);
      }
      i = e;
      break;
    }
    i = e;
  }
  if (W <= 0 || H <= 0 || W > 65535 || H > 65535) return Status::InvalidArgument("JPEG size {}x{} is invalid", W, H);
  // A few hundred bytes can declare a 65535 x 65535 frame whose blocks are all EOB: bound what
  // the decoded pixels may cost by what was sent (real JPEGs compress 10-20x; a hostile one gets
  // at most 16 MiB plus 256 bytes per byte of file, e.g. 16 Mpx of RGB for a 4 KB file).
  const uint64_t decoded = static_cast<uint64_t>(W) * static_cast<uint64_t>(H) * comps.size();
  if (decoded > (uint64_t{16} << 20) + 256 * static_cast<uint64_t>(d.size()))
    return Status::InvalidArgument("JPEG declares {}x{} pixels ({} bytes decoded) from a {}-byte file: over the 256x "
                                   "expansion (plus 16 MiB) gpuopt accepts",
                                   W, H, decoded, d.size());
  if (comps.size() == 1) comps[0].h = comps[0].v = 1;  // a single-component scan is non-interleaved
  int hmax = 1, vmax = 1;
  for (const Component& c : comps) hmax = std::max(hmax, c.h), vmax = std::max(vmax, c.v);
  const int mcux = (W + 8 * hmax - 1) / (8 * hmax), mcuy = (H + 8 * vmax - 1) / (8 * vmax);
  for (Component& c : comps) {
    c.bw = mcux * c.h;
    c.bh = mcuy * c.v;
    c.plane.assign(static_cast<size_t>(c.bw) * 8 * c.bh * 8, 0);
    if (!dc_t[c.td].present || !ac_t[c.ta].present) return Status::InvalidArgument("JPEG scan uses a missing Huffman table");
  }
  Reader rd(d, i);
  int coef[64], deq[64];
  int mcus = 0;
  for (int my = 0; my < mcuy; ++my)
    for (int mx = 0; mx < mcux; ++mx) {
      if (restart && mcus > 0 && mcus % restart == 0) {
        rd.restart();
        for (Component& c : comps) c.dc_pred = 0;
      }
      ++mcus;
      for (Component& c : comps)
        for (int by = 0; by < c.v; ++by)
          for (int bx = 0; bx < c.h; ++bx) {
            std::fill(coef, coef + 64, 0);
            GPUOPT_ASSIGN_OR_RETURN(int t, rd.decode(dc_t[c.td]));
            if (t > 11) return Status::InvalidArgument("JPEG DC magnitude {} is invalid", t);
            c.dc_pred += extend(rd.bits(t), t);
            coef[0] = c.dc_pred;
            for (int k = 1; k < 64;) {
              GPUOPT_ASSIGN_OR_RETURN(int rs, rd.decode(ac_t[c.ta]));
              const int r = rs >> 4, sz = rs & 15;
              if (sz == 0) {
                if (r != 15) break;  // EOB
                k += 16;
                continue;
              }
              k += r;
              if (k > 63) return Status::InvalidArgument("JPEG AC run overflows the block");
              coef[kZigzag[k]] = extend(rd.bits(sz), sz);
              ++k;
            }
            for (int k = 0; k < 64; ++k) deq[k] = coef[k] * qt[c.tq][k];
            const int row0 = (my * c.v + by) * 8, col0 = (mx * c.h + bx) * 8;
            idct_islow(deq, &c.plane[static_cast<size_t>(row0) * c.bw * 8 + col0], c.bw * 8);
          }
    }
  // Upsample each component to full resolution (fancy filters for 2x factors), then colour-convert.
  std::vector<std::vector<uint8_t>> full(comps.size(), std::vector<uint8_t>(static_cast<size_t>(W) * H));
  for (size_t k = 0; k < comps.size(); ++k) {
    const Component& c = comps[k];
    const int sx = hmax / c.h, sy = vmax / c.v;
    const int cw = (W * c.h + hmax - 1) / hmax, ch = (H * c.v + vmax - 1) / vmax;  // downsampled extents
    const int pw = c.bw * 8;
    auto at = [&](int y, int x) { return static_cast<int>(c.plane[static_cast<size_t>(y) * pw + x]); };
    std::vector<uint8_t> row(static_cast<size_t>(2 * cw) + 2);
    std::vector<int> sum(static_cast<size_t>(cw));
    for (int y = 0; y < H; ++y) {
      uint8_t* o = &full[k][static_cast<size_t>(y) * W];
      if (sx == 1 && sy == 1) {
        for (int x = 0; x < W; ++x) o[x] = static_cast<uint8_t>(at(y, x));
      } else if (sx == 2 && sy == 2) {  // h2v2: rows above/below the centre row, edges replicated
        const int cy = y / 2, ny = (y % 2 == 0) ? std::max(cy - 1, 0) : std::min(cy + 1, ch - 1);
        for (int x = 0; x < cw; ++x) sum[x] = at(cy, x) * 3 + at(ny, x);
        fancy_row(sum, cw, row.data(), 4, 8, 7);
        for (int x = 0; x < W; ++x) o[x] = row[x];
      } else if (sx == 2 && sy == 1) {  // h2v1: (3 * near + far + 1 or 2) >> 2, written as sums of 4 * sample
        for (int x = 0; x < cw; ++x) sum[x] = at(y, x) * 4;
        // h2v1 in libjpeg: out = (3*cur + prev + 1) >> 2 and (3*cur + next + 2) >> 2, with the edges
        // copied; with sums of 4*sample the same rounding is (12*cur + 4*prev + 4) >> 4 etc.
        fancy_row(sum, cw, row.data(), 4, 4, 8);
        for (int x = 0; x < W; ++x) o[x] = row[x];
      } else {  // other factor combinations: plain replication
        for (int x = 0; x < W; ++x) o[x] = static_cast<uint8_t>(at(std::min(y / sy, ch - 1), std::min(x / sx, cw - 1)));
      }
    }
  }
  *height = H;
  *width = W;
  rgb->assign(static_cast<size_t>(W) * H * 3, 0);
  for (size_t p = 0; p < static_cast<size_t>(W) * H; ++p) {
    uint8_t* o = &(*rgb)[p * 3];
    if (comps.size() == 1) {
      o[0] = o[1] = o[2] = full[0][p];
      continue;
    }
    // jdcolor.c: SCALEBITS 16, tables with ONE_HALF rounding; G adds the two terms before shifting.
    constexpr int64_t kHalf = int64_t{1} << 15;
    const int64_t y = full[0][p], cb = static_cast<int64_t>(full[1][p]) - 128, cr = static_cast<int64_t>(full[2][p]) - 128;
    const int64_t r = y + ((91881 * cr + kHalf) >> 16);
    const int64_t g = y + ((-22554 * cb + kHalf - 46802 * cr) >> 16);
    const int64_t b = y + ((116130 * cb + kHalf) >> 16);
    o[0] = static_cast<uint8_t>(std::clamp<int64_t>(r, 0, 255));
    o[1] = static_cast<uint8_t>(std::clamp<int64_t>(g, 0, 255));
    o[2] = static_cast<uint8_t>(std::clamp<int64_t>(b, 0, 255));
  }
  return Status::Ok();
}

}  // namespace gpuopt::jpeg
