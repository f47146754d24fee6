#!/usr/bin/env python3
"""step_loadonly.py DIR — copies of src/kernels/step_gpu.c whose GEMV rows
load every weight byte they load now but do (almost) no arithmetic with it,
one per weight kind, for bench/step_variants.sh:

    DIR/bf16-ld.c   16-bit rows: the four words of a 16-byte load XORed, one add
                    (no activation reads from shared memory either)
    DIR/q8b-ld.c    q8b: a block word times its scale, one multiply-add
    DIR/q4b-ld.c    q4b pairs: the three words XORed, one multiply-add
    DIR/q8b-ld16.c, DIR/q4b-ld16.c
                    the same bytes as 16-byte loads, a lane per 16 bytes (as
                    bf16 rows): what a layout with aligned quants could reach

If a load-only kernel takes about as long as the real one, the loads bound
it (bytes in flight, access pattern); if it is much faster, the arithmetic
does. The results are wrong: build them with scripts/step_variant.sh and run
them without their test (TEST_VARIANTS=):

    python3 bench/step_loadonly.py /tmp/ld
    for v in bf16-ld q8b-ld q4b-ld q8b-ld16 q4b-ld16; do SRC=/tmp/ld/$v.c scripts/step_variant.sh $v -DOT_STEP_LOADONLY; done
    # GPU machine: TEST_VARIANTS= bash bench/step_variants.sh $OUT

Each replacement is checked to match exactly once, so a change to the
kernel's macros stops this script rather than measuring something else."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src", "kernels", "step_gpu.c")

PATCHES = {
    "bf16-ld": (
        """    ST_X8(l_, h_, xp);                                                                                        \\
    (acc) += ST_BFLO((q).x) * l_.x + ST_BFHI((q).x) * l_.y + ST_BFLO((q).y) * l_.z + ST_BFHI((q).y) * l_.w +     \\
             ST_BFLO((q).z) * h_.x + ST_BFHI((q).z) * h_.y + ST_BFLO((q).w) * h_.z + ST_BFHI((q).w) * h_.w;      \\
""",
        """    (acc) += ot_kbits_f32(((q).x ^ (q).y ^ (q).z ^ (q).w) & 0x3fffffffu);                                    \\
"""),
    "q8b-ld": (
        """    const f4 x_ = *(const f4 *)(XP);                                                                          \\
    const uint32_t b_ = (wv) ^ 0x80808080u;                                                                   \\
    (acc) += (sc) * (OT_QG_I8F(b_, 0) * x_.x + OT_QG_I8F(b_, 1) * x_.y + OT_QG_I8F(b_, 2) * x_.z +                 \\
                     OT_QG_I8F(b_, 3) * x_.w);                                                                \\
""",
        """    (acc) += (sc) * ot_kbits_f32((wv) & 0x3fffffffu);                                                          \\
"""),
    "q4b-ld": (
        """    const uint32_t q_ = hi_ ? (B) : ((A) >> 16) | ((B) << 16);                                                \\
    const float d_ = ot_kf16_f32((uint16_t)((C) >> sh_));                                                     \\
    (ACC) += d_ * (OT_QG_U4F(q_, 0) * (XL).x + OT_QG_U4F(q_, 8) * (XL).y + OT_QG_U4F(q_, 16) * (XL).z +         \\
                   OT_QG_U4F(q_, 24) * (XL).w + OT_QG_U4F(q_, 4) * (XH).x + OT_QG_U4F(q_, 12) * (XH).y +       \\
                   OT_QG_U4F(q_, 20) * (XH).z + OT_QG_U4F(q_, 28) * (XH).w);                                \\
""",
        """    (ACC) += ot_kbits_f32(((A) ^ (B) ^ (C)) & 0x3fffffffu) * (XL).x;                                          \\
"""),
    # The same bytes read as 16-byte loads, a lane per 16 bytes of the row as
    # bf16 rows are read: what a quantized layout with 16-byte aligned quants
    # could reach at best (the loads of the bf16 kernel over fewer bytes).
    "q8b-ld16": (
        """    else { /* q8b: 8 lanes per block, a word (4 values) each, so that a phase's activations are 128 contiguous \\
""",
        """    else if (1) { /* load-only: the row's q8b bytes (36 per 32 values) as 16-byte loads */                  \\
      const u128 *row = (const u128 *)((const unsigned char *)(w) + (n) * ((ldw) / 32) * 36);                 \\
      const int64_t nv = (K) / 32 * 36 / 16;                                                                  \\
      int64_t v = lane;                                                                                       \\
      ST_ROW_PASS(16, ST_DOT_LD16, 0, a)                                                                      \\
      for (; v < nv; v += OT_WARP_SIZE) ST_DOT_LD16(s0, row[v], a);                                           \\
    } else { /* q8b: 8 lanes per block, a word (4 values) each, so that a phase's activations are 128 contiguous \\
"""),
    "q4b-ld16": (
        """    if (ST_QG && (WT_) == OT_Q4B && OT_QG_ROWS_OK(0, W_, K_, LDW_)) {""",
        """    if ((WT_) == OT_Q4B) { /* load-only: each of the 4 rows' q4b bytes (18 per 32 values) as 16-byte loads */ \\
      OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++) {                                                         \\
        const u128 *row = (const u128 *)((const unsigned char *)(W_) + ((N0_) + (r < (NR_) ? r : 0)) * ((LDW_) / 32) * 18); \\
        const int64_t nv = (K_) / 32 * 18 / 16;                                                                \\
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;                                                      \\
        int64_t v = lane;                                                                                      \\
        ST_ROW_PASS(8, ST_DOT_LD16, 0, A_)                                                                     \\
        for (; v < nv; v += OT_WARP_SIZE) ST_DOT_LD16(s0, row[v], A_);                                         \\
        (acc)[r] += (s0 + s1) + (s2 + s3);                                                                     \\
      }                                                                                                        \\
    } else if (ST_QG && (WT_) == OT_Q4B && OT_QG_ROWS_OK(0, W_, K_, LDW_)) {"""),
}
# the load-only products of the 16-byte variants (no activations read)
LD16 = """#define ST_DOT_LD16(acc, q, xp) ((acc) += ot_kbits_f32(((q).x ^ (q).y ^ (q).z ^ (q).w) & 0x3fffffffu))
"""
LD16_AT = "#define ST_ROW(T, ELEMS, DOT, W, LDW, NROW, A, K, MAXU)"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(SRC) as f:
        src = f.read()
    for name, (old, new) in PATCHES.items():
        n = src.count(old)
        if n != 1:
            sys.exit(f"step_loadonly.py: {name}: the text to replace occurs {n} times in {SRC} "
                     "(the kernel changed: update the patch)")
        path = os.path.join(out, name + ".c")
        text = src.replace(old, new)
        if name.endswith("-ld16"):
            text = text.replace(LD16_AT, LD16 + LD16_AT, 1)
        with open(path, "w") as f:
            f.write(text)
        print(path)


if __name__ == "__main__":
    main()
