#!/usr/bin/env python3
"""step_loadonly.py DIR — copies of src/kernels/step_gpu.c whose GEMV rows
load every weight byte they load now but do (almost) no arithmetic with it,
one per weight kind, for bench/step_variants.sh:

    DIR/bf16-ld.c   16-bit rows: the four words of a 16-byte load XORed, one add
                    (no activation reads from shared memory either)
    DIR/q8b-ld.c    q8b: a block word times its scale, one multiply-add
    DIR/q4b-ld.c    q4b pairs: the three words XORed, one multiply-add

If a load-only kernel takes about as long as the real one, the loads bound
it (bytes in flight, access pattern); if it is much faster, the arithmetic
does. The results are wrong: build them with scripts/step_variant.sh and run
them without their test (TEST_VARIANTS=):

    python3 bench/step_loadonly.py /tmp/ld
    for d in bf16 q8b q4b; do SRC=/tmp/ld/$d-ld.c scripts/step_variant.sh $d-ld -DOT_STEP_LOADONLY; done
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
    (acc) += (sc) * (ST_I8F(b_, 0) * x_.x + ST_I8F(b_, 1) * x_.y + ST_I8F(b_, 2) * x_.z + ST_I8F(b_, 3) * x_.w); \\
""",
        """    (acc) += (sc) * ot_kbits_f32((wv) & 0x3fffffffu);                                                          \\
"""),
    "q4b-ld": (
        """    const uint32_t q_ = hi_ ? (B) : ((A) >> 16) | ((B) << 16);                                                \\
    const float d_ = ot_kf16_f32((uint16_t)((C) >> sh_));                                                     \\
    (ACC) += d_ * (ST_U4F(q_, 0) * (XL).x + ST_U4F(q_, 8) * (XL).y + ST_U4F(q_, 16) * (XL).z +                  \\
                   ST_U4F(q_, 24) * (XL).w + ST_U4F(q_, 4) * (XH).x + ST_U4F(q_, 12) * (XH).y +                \\
                   ST_U4F(q_, 20) * (XH).z + ST_U4F(q_, 28) * (XH).w);                                         \\
""",
        """    (ACC) += ot_kbits_f32(((A) ^ (B) ^ (C)) & 0x3fffffffu) * (XL).x;                                          \\
"""),
}


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
        with open(path, "w") as f:
            f.write(src.replace(old, new))
        print(path)


if __name__ == "__main__":
    main()
