#!/usr/bin/env python3
"""step_sass.py SASS [KERNEL [FILE]] — the loops of a kernel in nvdisasm -g -c
output (scripts/step_sass.sh makes it), innermost first by address: for
each backward branch, the instructions between its target and itself, the
source lines they come from, and what they do: global/generic loads (16-byte
ones apart), shared loads, FFMA, and local-memory loads and stores (LDL/STL:
spills, or arrays the compiler could not keep in registers). A hot loop with
LDL in it reads local memory on every pass; one without is free of spills
whatever ptxas's totals say. KERNEL: a substring of the kernel's name
(default kstep); FILE: its source file, whose lines are listed first
(default step_gpu.c)."""
import re
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    want = sys.argv[2] if len(sys.argv) > 2 else "kstep"
    want_file = sys.argv[3] if len(sys.argv) > 3 else "step_gpu.c"
    addr = lambda l: int(re.search(r"/\*([0-9a-f]+)\*/", l).group(1), 16)
    kern, cur, ins, lab, pend = None, None, [], {}, []
    for line in open(sys.argv[1]):
        m = re.search(r'//## File "(.*)", line (\d+)', line)
        if m:
            cur = "%s:%s" % (m.group(1).split("/")[-1], m.group(2))
            continue
        m = re.match(r"^\.text\.(\S+):", line)
        if m:
            kern = m.group(1)
        m = re.match(r"^(\.L_x_\d+):", line)
        if m:
            pend.append(m.group(1))
            continue
        if re.match(r"\s+/\*[0-9a-f]+\*/", line):
            for p in pend:
                lab[p] = addr(line)
            pend = []
            if kern and want in kern:
                ins.append((cur, line))
    if not ins:
        sys.exit("step_sass.py: no kernel named *%s* in %s" % (want, sys.argv[1]))
    loops = []
    for _, l in ins:
        m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", l)
        if m and m.group(1) in lab and lab[m.group(1)] < addr(l):
            loops.append((lab[m.group(1)], addr(l)))
    count = lambda body, pat: sum(bool(re.search(pat, l)) for _, l in body)
    print("%-13s %6s %6s %6s %5s %5s %5s %5s  %s" % ("loop", "instrs", "loads", "16B", "LDS", "FFMA", "LDL", "STL",
                                                    "source lines"))
    big = 0
    for lo, hi in sorted(set(loops), key=lambda x: x[1] - x[0]):
        body = [(c, l) for c, l in ins if lo <= addr(l) <= hi]
        if len(body) > 4000:  # the instruction loop and the branches across it, not a loop of one op
            big += 1
            continue
        src = sorted({c for c, _ in body if c},  # the kernel's own file first
                     key=lambda s: (not s.startswith(want_file), s.split(":")[0], int(s.split(":")[1])))
        shown = ", ".join(src[:4]) + (", ..." if len(src) > 4 else "")
        print("%5x-%-7x %6d %6d %6d %5d %5d %5d %5d  %s" % (
            lo, hi, len(body), count(body, r"\bLDG\b|\bLD\.E"), count(body, r"\.128\b"), count(body, r"\bLDS\b"),
            count(body, r"\bFFMA\b"), count(body, r"\bLDL\b"), count(body, r"\bSTL\b"), shown))
    if big:
        print("(%d backward branches over more than 4000 instructions not shown: the loop over the instructions)" % big)


if __name__ == "__main__":
    main()
