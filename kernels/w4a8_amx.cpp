// W4A8 prefill on AMX-INT8 tiles (Sapphire Rapids and later). Per 16-row weight tile and group:
// the group's k-octets become B-tile rows with one mask / shift each (Int4Vnni16's 64 bytes per
// octet are B[k/4][4n + k%4] already); for every 16 tokens, tdpbssd accumulates the group's int32
// dots in C, which is stored and folded into f32 sums with the scale and zero point (w4a8.h).
// Tiles: 0 = C (16 x 16 int32), 1 = A (16 tokens x kstep bytes), 2 / 3 = B of the group's first /
// second kstep chunk (kstep / 4 rows x 64 bytes). kstep = min(group, 64): a group-32 tile multiply
// stops at its group's end, so scales stay per group.
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized in callers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/w4a8.h"

namespace fish {
namespace {

struct alignas(64) TileConfig {  // ldtilecfg memory format, palette 1 (Intel SDM vol. 1, 3.2)
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row of tile i
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

}  // namespace

void w4a8_tiles_amx(const uint8_t* qs, const uint16_t* scales, const uint8_t* zeros,
                    const uint16_t* mins, int64_t n_in, int group_size, int64_t n_out,
                    int64_t t_begin, int64_t t_end, const int8_t* aq, const float* a_scales,
                    const float* a_sums, int64_t n_tok, float* y, float* acc_scratch) {
  const int kstep = group_size < 64 ? group_size : 64;
  const int chunks = group_size / kstep;  // 1 or 2
  TileConfig cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  cfg.rows[0] = 16;
  cfg.colsb[0] = 64;
  cfg.rows[1] = 16;
  cfg.colsb[1] = uint16_t(kstep);
  for (int b = 2; b < 4; ++b) {
    cfg.rows[b] = uint8_t(kstep / 4);
    cfg.colsb[b] = 64;
  }
  _tile_loadconfig(&cfg);

  const int64_t groups = n_in / group_size;
  const int octets = group_size / 8;
  const __m512i mask = _mm512_set1_epi8(0x0F);
  alignas(64) uint8_t bbuf[2][16 * 64];
  alignas(64) int32_t cbuf[16 * 16];
  for (int64_t t = t_begin; t < t_end; ++t) {
    const uint8_t* tq = qs + t * n_in * 8;
    const uint16_t* ts = scales + t * groups * 16;
    const uint8_t* tz = zeros != nullptr ? zeros + t * groups * 16 : nullptr;
    const uint16_t* tm = mins != nullptr ? mins + t * groups * 16 : nullptr;
    std::memset(acc_scratch, 0, size_t(n_tok) * 16 * sizeof(float));
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* gq = tq + g * octets * 64;
      for (int j = 0; j < octets; ++j) {
        const __m512i v = _mm512_loadu_si512(gq + j * 64);
        uint8_t* dst = bbuf[(j * 8) / kstep] + ((j * 8) % kstep) / 4 * 64;
        _mm512_store_si512(dst, _mm512_and_si512(v, mask));
        _mm512_store_si512(dst + 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), mask));
      }
      _tile_loadd(2, bbuf[0], 64);
      if (chunks == 2) _tile_loadd(3, bbuf[1], 64);
      const __m512 s =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ts + g * 16)));
      const __m512 z = tz != nullptr ? _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                           reinterpret_cast<const __m128i*>(tz + g * 16))))
                                     : _mm512_set1_ps(8.0f);
      // The per-group offset term, added as off * a_sum: -(s z), or the fp offset m.
      const __m512 off =
          tm != nullptr
              ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tm + g * 16)))
              : _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(s, z));
      for (int64_t m0 = 0; m0 < n_tok; m0 += 16) {
        const int8_t* a = aq + m0 * n_in + g * group_size;
        _tile_zero(0);
        _tile_loadd(1, a, n_in);
        _tile_dpbssd(0, 1, 2);
        if (chunks == 2) {
          _tile_loadd(1, a + kstep, n_in);
          _tile_dpbssd(0, 1, 3);
        }
        _tile_stored(0, cbuf, 64);
        const int64_t m_end = n_tok - m0 < 16 ? n_tok - m0 : 16;
        for (int64_t r = 0; r < m_end; ++r) {
          const int64_t m = m0 + r;
          float* acc = acc_scratch + m * 16;
          __m512 va = _mm512_loadu_ps(acc);
          const __m512i c = _mm512_load_si512(cbuf + r * 16);
          va = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c),
                               _mm512_mul_ps(s, _mm512_set1_ps(a_scales[m * groups + g])), va);
          va = _mm512_fmadd_ps(off, _mm512_set1_ps(a_sums[m * groups + g]), va);
          _mm512_storeu_ps(acc, va);
        }
      }
    }
    const int64_t rows = n_out - t * 16 < 16 ? n_out - t * 16 : 16;
    const __mmask16 keep = __mmask16((1u << rows) - 1u);
    for (int64_t m = 0; m < n_tok; ++m) {
      _mm512_mask_storeu_ps(y + m * n_out + t * 16, keep, _mm512_loadu_ps(acc_scratch + m * 16));
    }
  }
  _tile_release();
}

}  // namespace fish
