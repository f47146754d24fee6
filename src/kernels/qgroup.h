/* qgroup.h (internal to src/kernels) — q8b and q4b rows read 16 bytes a
 * lane, in the layout they have.
 *
 * A q8b block is 36 bytes and a q4b block 18, so a lane that takes whole
 * blocks or aligned words of them loads 4 bytes at a time (step_gpu.c's
 * ST_Q8_PASS and ST_Q4_PAIR_WORD): four times the load instructions of a
 * bf16 row for the same bytes, and a quarter of the bytes in flight per
 * load. But 4 q8b blocks (4 x 36) and 8 q4b blocks (8 x 18) are both 144
 * bytes, nine aligned 16-byte words: a "group" of 128 (q8b) or 256 (q4b)
 * values. Nine lanes read a group, lane j its word j, so a warp's 27 lanes
 * read three groups (432 contiguous bytes) per load instruction, the other
 * 5 lanes idle; the row must hold whole groups and start 16-byte aligned.
 *
 * What a lane's word holds depends on j only, so it is worked out once
 * (ot_qg_lane_init; the kernels do it once per instruction): which of its 4-byte (q8b) or 2-byte (q4b) pieces
 * is a block's scale and which are quants, at which activation each piece
 * starts, and which of the two blocks a word can touch (block A, the one
 * it starts in, or B) each piece belongs to. A lane sums its pieces per
 * block, then scales the two sums. Each scale lies in exactly one lane's
 * word (q8b: block b's in word 2b, q4b: block b's in word b, at piece b),
 * which offers it (ot_qg_offer) to the lanes of its group through a warp
 * shuffle: src_a and src_b are the lanes to read.
 *
 * The sums are the blocks' dot products in another order than gemv1's, so
 * the results match the per-op path to f32 rounding, not bit for bit.
 * tests/test_qgroup.c runs the lanes of a warp on the host against a
 * plain dot product of the dequantized row: the lane functions with the
 * shuffles as array reads, and the kernels' loops (OT_QG_ROW8,
 * OT_QG_ROWS4, below) with 32 threads as the lanes.
 *
 * always_inline, as docs/writing-a-kernel.md prescribes for helpers of bare
 * kernels. */
#ifndef OT_KERNELS_QGROUP_H
#define OT_KERNELS_QGROUP_H

#include <stdint.h>

#include "kernels/kcommon.h"
#include "kernels/warp_ops.h"
#include "ot_pragmas.h"

#define OT_QG_BYTES 144 /* a group: 4 q8b or 8 q4b blocks */
#define OT_QG_WORDS 9   /* its 16-byte words, a lane each */
#define OT_QG_GROUPS 3  /* groups a warp reads at once (27 of its 32 lanes) */
#define OT_QG_VALUES(q8) ((q8) ? 128 : 256)

/* Quantized values as exact floats without I2F (a quarter-rate
 * instruction on the SMs, enough of them to bound a quantized GEMV): an
 * unsigned field put in the mantissa of 2^23, 2^23 plus its bias taken off.
 * OT_QG_I8F: byte k of a word whose bytes were biased by 0x80 (int8 + 128);
 * OT_QG_U4F: the nibble at bit `sh`, minus 8 (q4b's offset). */
#define OT_QG_I8F(u, k) (ot_kbits_f32(0x4B000000u | (((u) >> (8 * (k))) & 0xffu)) - 8388736.0f)
#define OT_QG_U4F(u, sh) (ot_kbits_f32(0x4B000000u | (((u) >> (sh)) & 15u)) - 8388616.0f)
/* The same values with one byte permute each (ot_qg_prmt) where the forms
 * above take a shift, a mask and an or (written portably, LLVM folds the
 * masks back into the shifts): OT_QG_BYTE_2P23 is 2^23 + byte k of v.
 * OT_QG_B4F: byte k of a word of nibbles already masked to 0..15 (u &
 * 0x0F0F0F0F, or (u >> 4) & 0x0F0F0F0F), minus 8: OT_QG_U4F's value.
 * OT_QG_B8F: OT_QG_I8F's value (byte k of a word of int8 biased by 0x80). */
#define OT_QG_BYTE_2P23(v, k) ot_kbits_f32(ot_qg_prmt((v), 0x4B000000u, 0x7440u | (k)))
#define OT_QG_B4F(v, k) (OT_QG_BYTE_2P23(v, k) - 8388616.0f)
#define OT_QG_B8F(v, k) (OT_QG_BYTE_2P23(v, k) - 8388736.0f)

OT_DECLARE_TARGET_BEGIN

/* PTX prmt.b32 in its default mode: byte i of the result is byte
 * (sel >> 4i) & 7 of the 8 bytes {b:a} (a's bytes 0-3, b's 4-7). The
 * instruction on NVIDIA GPUs; the same bytes by shifts elsewhere (the host
 * tests run this form). */
static inline __attribute__((always_inline)) uint32_t ot_qg_prmt(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(__NVPTX__)
  return __nvvm_prmt(a, b, sel);
#else
  const uint64_t ab = (uint64_t)b << 32 | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; i++) r |= (uint32_t)((ab >> (8 * ((sel >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return r;
#endif
}

/* A lane's constants, packed into four registers: the step kernel works
 * them out once per instruction and keeps them across its rows, in a kernel
 * that already uses all 255 registers a thread may have. */
typedef struct ot_qg_lane {
  uint32_t off[2]; /* piece k's first activation in the group, byte k % 4 of off[k / 4] (q4b: of its low
                      nibbles; the high ones are 16 further) */
  uint32_t where;  /* bits 0-3 j: the lane's word of its group, 0..8 (9: an idle lane); 4-5: its group
                      among the warp's three; 8-12 src_a, 16-20 src_b: the warp lanes that offer block A's and
                      block B's scale; 24-27: 1 + the piece of its word that is a scale (0: none) */
  uint32_t kind;   /* bit k: piece k holds quants (else it is a scale); bit 8 + k: piece k is block B's */
} ot_qg_lane;
#define OT_QG_J(L) ((int)((L).where & 15u))
#define OT_QG_G(L) ((int)(((L).where >> 4) & 3u))
#define OT_QG_SRC_A(L) ((int)(((L).where >> 8) & 31u))
#define OT_QG_SRC_B(L) ((int)(((L).where >> 16) & 31u))
#define OT_QG_OFFER(L) ((int)(((L).where >> 24) & 15u) - 1)
#define OT_QG_OFF(L, k) ((((L).off[(k) >> 2] >> (8 * ((k) & 3))) & 255u))
#define OT_QG_QUANT(L, k) (((L).kind >> (k)) & 1u)
#define OT_QG_IN_B(L, k) (((L).kind >> (8 + (k))) & 1u)
/* 1.0f where piece k holds quants of block A (OT_QG_FA) or B (OT_QG_FB), else
 * 0.0f: a piece's product goes into both sums times these (s + 0 t is s
 * exactly, contracted or not), so the sums are those of a select, without a branch on a value
 * that differs between lanes (a select compiled to one: BSSY/BSYNC in the
 * SASS) */
#define OT_QG_FA(L, k) (OT_QG_QUANT(L, k) && !OT_QG_IN_B(L, k) ? 1.0f : 0.0f)
#define OT_QG_FB(L, k) (OT_QG_QUANT(L, k) && OT_QG_IN_B(L, k) ? 1.0f : 0.0f)

/* Lane `lane`'s constants for q8b (q8 = 1: four 4-byte pieces, each 4
 * int8 of one block) or q4b (q8 = 0: eight 2-byte pieces, each 2 bytes of
 * one block's qs, 4 nibbles). */
static inline __attribute__((always_inline)) ot_qg_lane ot_qg_lane_init(int q8, int lane) {
  ot_qg_lane L = {{0, 0}, 0, 0};
  const int busy = lane < OT_QG_GROUPS * OT_QG_WORDS;
  const int j = busy ? lane % OT_QG_WORDS : OT_QG_WORDS, g = busy ? lane / OT_QG_WORDS : 0;
  const int pieces = q8 ? 4 : 8; /* a block is 9 pieces: its scale, then 8 of quants */
  const int first = pieces * (busy ? j : 0), ba = first / 9;
  int bb = ba, offer = -1;
  for (int k = 0; k < pieces && busy; k++) {
    const int h = first + k, b = h / 9, p = h % 9;
    if (p == 0) {
      offer = k;
    } else {
      L.kind |= 1u << k;
      L.off[k >> 2] |= (uint32_t)(32 * b + (q8 ? 4 : 2) * (p - 1)) << (8 * (k & 3));
    }
    if (b != ba) L.kind |= 1u << (8 + k), bb = b;
  }
  /* block b's scale is in word (9b) / pieces: q8b 2b, q4b b */
  const int base = OT_QG_WORDS * g;
  const int sa = busy ? base + (q8 ? 2 * ba : ba) : lane, sb = busy ? base + (q8 ? 2 * bb : bb) : lane;
  L.where = (uint32_t)j | (uint32_t)g << 4 | (uint32_t)sa << 8 | (uint32_t)sb << 16 | (uint32_t)(offer + 1) << 24;
  return L;
}

/* Whether rows of W (q8b: q8 = 1, else q4b) of K values, LDW apart, can be
 * read in groups: whole groups, 16-byte aligned. The kernels' one test
 * (the activations' alignment is theirs to check). A macro: written as an
 * inline function it changed the step kernel's register allocation (ptxas
 * 11.8, -DST_QG=1: spills 208/368 -> 236/416 bytes). */
#define OT_QG_ROWS_OK(q8, w, K, ldw) \
  ((K) % OT_QG_VALUES(q8) == 0 && (ldw) % OT_QG_VALUES(q8) == 0 && ((uintptr_t)(w) & 15) == 0)

/* The scale the lane's word (x, y, z, w) offers its group, 0 if none. */
static inline __attribute__((always_inline)) float ot_qg_offer(int q8, const ot_qg_lane L, uint32_t x, uint32_t y,
                                                               uint32_t z, uint32_t w) {
  const int k = OT_QG_OFFER(L);
  if (k < 0) return 0.0f;
  const int wi = q8 ? k : k >> 1;
  const uint32_t u = wi == 0 ? x : wi == 1 ? y : wi == 2 ? z : w;
  return q8 ? ot_kbits_f32(u) : ot_kf16_f32((uint16_t)(u >> (16 * (k & 1))));
}

typedef struct __attribute__((aligned(16))) ot_qg_f4 {
  float x, y, z, w;
} ot_qg_f4;
typedef struct __attribute__((aligned(8))) ot_qg_f2 {
  float x, y;
} ot_qg_f2;

/* q8b piece k (word u) dotted with its 4 activations, into ta or tb */
#define OT_QG_PIECE8(L, k, u, XP, ta, tb)                                                                        \
  do {                                                                                                           \
    const ot_qg_f4 qgx_ = *(const ot_qg_f4 *)((XP) + OT_QG_OFF(L, k));                                           \
    const uint32_t qgb_ = (u) ^ 0x80808080u;                                                                     \
    const float qgt_ = OT_QG_B8F(qgb_, 0) * qgx_.x + OT_QG_B8F(qgb_, 1) * qgx_.y + OT_QG_B8F(qgb_, 2) * qgx_.z + \
                       OT_QG_B8F(qgb_, 3) * qgx_.w;                                                              \
    (ta) += OT_QG_FA(L, k) * qgt_;                                                                               \
    (tb) += OT_QG_FB(L, k) * qgt_;                                                                               \
  } while (0)

/* *ta, *tb += the lane's q8b word (x, y, z, w) dotted with its group's
 * activations xg (128 floats, 16-byte aligned), per block */
static inline __attribute__((always_inline)) void ot_qg_dot8(const ot_qg_lane L, uint32_t x, uint32_t y, uint32_t z,
                                                             uint32_t w, const float *xg, float *ta, float *tb) {
  float a = 0.0f, b = 0.0f;
  OT_QG_PIECE8(L, 0, x, xg, a, b);
  OT_QG_PIECE8(L, 1, y, xg, a, b);
  OT_QG_PIECE8(L, 2, z, xg, a, b);
  OT_QG_PIECE8(L, 3, w, xg, a, b);
  *ta += a, *tb += b;
}

/* q4b piece k of R rows: the half SH (0 or 16) of word U[r] of each row r
 * < R, 2 bytes of qs whose low nibbles are values off, off + 1 and high
 * ones off + 16, off + 17; the activations read once for the R rows */
#define OT_QG_PIECE4(L, k, U, SH, XP, R, ta, tb)                                                                 \
  do {                                                                                                           \
    const ot_qg_f2 qglo_ = *(const ot_qg_f2 *)((XP) + OT_QG_OFF(L, k));                                          \
    const ot_qg_f2 qghi_ = *(const ot_qg_f2 *)((XP) + OT_QG_OFF(L, k) + 16);                                     \
    const float qgfa_ = OT_QG_FA(L, k), qgfb_ = OT_QG_FB(L, k);                                                  \
    OT_UNROLL for (int qgr_ = 0; qgr_ < (R); qgr_++) {                                                           \
      /* the word's low and high nibbles as bytes: each value is then one byte (PRMT), not a shift and a mask */ \
      const uint32_t qgnl_ = (U)[qgr_] & 0x0F0F0F0Fu, qgnh_ = ((U)[qgr_] >> 4) & 0x0F0F0F0Fu;                    \
      const float qgt_ = OT_QG_B4F(qgnl_, (SH) / 8) * qglo_.x + OT_QG_B4F(qgnl_, (SH) / 8 + 1) * qglo_.y +       \
                         OT_QG_B4F(qgnh_, (SH) / 8) * qghi_.x + OT_QG_B4F(qgnh_, (SH) / 8 + 1) * qghi_.y;        \
      (ta)[qgr_] += qgfa_ * qgt_;                                                                                \
      (tb)[qgr_] += qgfb_ * qgt_;                                                                                \
    }                                                                                                            \
  } while (0)

/* ta[r], tb[r] += rows r < R's q4b words (wx[r], wy[r], wz[r], ww[r])
 * dotted with the group's activations xg (256 floats, 8-byte aligned), per
 * block */
#define OT_QG_DOT4(L, R, wx, wy, wz, ww, XG, ta, tb) \
  do {                                               \
    OT_QG_PIECE4(L, 0, wx, 0, XG, R, ta, tb);        \
    OT_QG_PIECE4(L, 1, wx, 16, XG, R, ta, tb);       \
    OT_QG_PIECE4(L, 2, wy, 0, XG, R, ta, tb);        \
    OT_QG_PIECE4(L, 3, wy, 16, XG, R, ta, tb);       \
    OT_QG_PIECE4(L, 4, wz, 0, XG, R, ta, tb);        \
    OT_QG_PIECE4(L, 5, wz, 16, XG, R, ta, tb);       \
    OT_QG_PIECE4(L, 6, ww, 0, XG, R, ta, tb);        \
    OT_QG_PIECE4(L, 7, ww, 16, XG, R, ta, tb);       \
  } while (0)

/* A lane's value to the lane that asks (a test replaces it with threads). */
#ifndef OT_QG_BCAST
#define OT_QG_BCAST(v, src) ot_warp_bcast((v), (src))
#endif

/* A 16-byte word as a lane loads it. */
typedef struct __attribute__((aligned(16))) ot_qg_word {
  uint32_t x, y, z, w;
} ot_qg_word;

/* The GPU kernels' loops (macros, as docs/writing-a-kernel.md prescribes
 * for bare kernels). Every lane runs every pass, the shuffles need the
 * whole warp: a lane past the row's groups, or idle, loads nothing and
 * adds 0. (Loading the row's first word instead, to have no branch around
 * the load, made the q8b loop longer: 896 -> 920 SASS instructions.) L is
 * the lane's ot_qg_lane, worked out once outside the loop; U the passes (3
 * groups each) whose 16-byte loads a lane has in flight.
 *
 * S0..S3 += the lane's part of q8b row NROW of W (row stride LDW values)
 * against activations A (K floats, 16-byte aligned), the passes' sums into
 * the four accumulators in turn. */
#define OT_QG_ROW8(L, U, S0, S1, S2, S3, W, LDW, NROW, A, K)                                                   \
  do {                                                                                                         \
    const ot_qg_word *qgrow_ = (const ot_qg_word *)((const unsigned char *)(W) + (NROW) * ((LDW) / 32) * 36);  \
    const int64_t qgng_ = (K) / 128;                                                                           \
    const int qgj_ = OT_QG_J(L), qgg_ = OT_QG_G(L);                                                            \
    for (int64_t qg0_ = qgg_; qg0_ - qgg_ < qgng_; qg0_ += OT_QG_GROUPS * (U)) {                               \
      ot_qg_word qgq_[U];                                                                                      \
      OT_UNROLL for (int qgu_ = 0; qgu_ < (U); qgu_++) {                                                       \
        const int64_t qgi_ = qg0_ + OT_QG_GROUPS * qgu_;                                                       \
        qgq_[qgu_] =                                                                                           \
            qgj_ < OT_QG_WORDS && qgi_ < qgng_ ? qgrow_[OT_QG_WORDS * qgi_ + qgj_] : (ot_qg_word){0, 0, 0, 0}; \
      }                                                                                                        \
      OT_UNROLL for (int qgu_ = 0; qgu_ < (U); qgu_++) {                                                       \
        const int64_t qgi_ = qg0_ + OT_QG_GROUPS * qgu_;                                                       \
        const int qgok_ = qgj_ < OT_QG_WORDS && qgi_ < qgng_;                                                  \
        const ot_qg_word qgv_ = qgq_[qgu_];                                                                    \
        const float qgof_ = ot_qg_offer(1, L, qgv_.x, qgv_.y, qgv_.z, qgv_.w);                                 \
        const float qgsa_ = OT_QG_BCAST(qgof_, OT_QG_SRC_A(L)), qgsb_ = OT_QG_BCAST(qgof_, OT_QG_SRC_B(L));    \
        float qgta_ = 0.0f, qgtb_ = 0.0f;                                                                      \
        ot_qg_dot8(L, qgv_.x, qgv_.y, qgv_.z, qgv_.w, (A) + 128 * (qgok_ ? qgi_ : 0), &qgta_, &qgtb_);         \
        const float qgd_ = qgok_ ? qgsa_ * qgta_ + qgsb_ * qgtb_ : 0.0f;                                       \
        if (qgu_ % 4 == 0) (S0) += qgd_;                                                                       \
        else if (qgu_ % 4 == 1) (S1) += qgd_;                                                                  \
        else if (qgu_ % 4 == 2) (S2) += qgd_;                                                                  \
        else (S3) += qgd_;                                                                                     \
      }                                                                                                        \
    }                                                                                                          \
  } while (0)

/* ACC[r] += the lane's part of q4b rows N0 + r of W (r < R; rows past NR
 * read row N0, their sums unused) against activations A (K floats, 8-byte
 * aligned); each piece's activations are read once for the R rows. */
#define OT_QG_ROWS4(L, U, R, ACC, W, LDW, N0, NR, A, K)                                                               \
  do {                                                                                                                \
    const int64_t qgrb_ = (LDW) / 32 * 18, qgng_ = (K) / 256;                                                         \
    const unsigned char *qgw0_ = (const unsigned char *)(W) + (N0) * qgrb_;                                           \
    const int qgj_ = OT_QG_J(L), qgg_ = OT_QG_G(L);                                                                   \
    for (int64_t qg0_ = qgg_; qg0_ - qgg_ < qgng_; qg0_ += OT_QG_GROUPS * (U)) {                                      \
      uint32_t qgx_[U][R], qgy_[U][R], qgz_[U][R], qgw_[U][R];                                                        \
      OT_UNROLL for (int qgu_ = 0; qgu_ < (U); qgu_++) {                                                              \
        const int64_t qgi_ = qg0_ + OT_QG_GROUPS * qgu_;                                                              \
        const int qgok_ = qgj_ < OT_QG_WORDS && qgi_ < qgng_;                                                         \
        OT_UNROLL for (int qgr_ = 0; qgr_ < (R); qgr_++) {                                                            \
          const ot_qg_word qgv_ =                                                                                     \
              qgok_ ? ((const ot_qg_word *)(qgw0_ + (qgr_ < (NR) ? qgr_ : 0) * qgrb_))[OT_QG_WORDS * qgi_ + qgj_]     \
                    : (ot_qg_word){0, 0, 0, 0};                                                                       \
          qgx_[qgu_][qgr_] = qgv_.x, qgy_[qgu_][qgr_] = qgv_.y, qgz_[qgu_][qgr_] = qgv_.z, qgw_[qgu_][qgr_] = qgv_.w; \
        }                                                                                                             \
      }                                                                                                               \
      OT_UNROLL for (int qgu_ = 0; qgu_ < (U); qgu_++) {                                                              \
        const int64_t qgi_ = qg0_ + OT_QG_GROUPS * qgu_;                                                              \
        const int qgok_ = qgj_ < OT_QG_WORDS && qgi_ < qgng_;                                                         \
        float qgta_[R] = {0}, qgtb_[R] = {0};                                                                         \
        OT_QG_DOT4(L, R, qgx_[qgu_], qgy_[qgu_], qgz_[qgu_], qgw_[qgu_], (A) + 256 * (qgok_ ? qgi_ : 0), qgta_,       \
                   qgtb_);                                                                                            \
        OT_UNROLL for (int qgr_ = 0; qgr_ < (R); qgr_++) {                                                            \
          const float qgof_ =                                                                                         \
              ot_qg_offer(0, L, qgx_[qgu_][qgr_], qgy_[qgu_][qgr_], qgz_[qgu_][qgr_], qgw_[qgu_][qgr_]);              \
          const float qgsa_ = OT_QG_BCAST(qgof_, OT_QG_SRC_A(L)), qgsb_ = OT_QG_BCAST(qgof_, OT_QG_SRC_B(L));         \
          (ACC)[qgr_] += qgok_ ? qgsa_ * qgta_[qgr_] + qgsb_ * qgtb_[qgr_] : 0.0f;                                    \
        }                                                                                                             \
      }                                                                                                               \
    }                                                                                                                 \
  } while (0)

OT_DECLARE_TARGET_END

#endif
