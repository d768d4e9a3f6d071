#!/usr/bin/env python3
"""The table of an A/B run of parla-translate (bench/translate_ab.sh, bench/packed_fp32_ab.sh).

  python3 bench/ab_summary.py RATES ROUNDS LABEL_A HEADER_A LABEL_B HEADER_B

RATES holds lines "setting label tokens_per_s" and "setting same|differ" (one per round: were the two outputs
identical). Prints the CPU's flags, then per setting min / median / max of each label, the ratio of the medians
(B / A) and in how many rounds the outputs were identical."""
import collections
import statistics
import sys

FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_int8")


def main():
    rates_file, rounds, label_a, header_a, label_b, header_b = sys.argv[1:7]
    flags = []
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = [x for x in line.split(":", 1)[1].split() if x in FLAGS]
                break
    cores = sum(1 for line in open("/proc/cpuinfo") if line.startswith("processor"))
    print(f"CPU: {cores} cores, flags {' '.join(flags)}")
    rates, same = collections.defaultdict(list), collections.Counter()
    for line in open(rates_file):
        p = line.split()
        if len(p) == 3:
            rates[(p[0], p[1])].append(int(p[2]))
        elif p[1] == "same":
            same[p[0]] += 1
    print(f"{'setting':22s} {header_a:>24s} {header_b:>24s} {'B/A':>6s}  identical")
    for name in dict.fromkeys(k for k, _ in rates):
        a, b = sorted(rates[(name, label_a)]), sorted(rates[(name, label_b)])
        f = lambda v: f"{v[0]:,} / {statistics.median(v):,.0f} / {v[-1]:,}"
        ratio = statistics.median(b) / statistics.median(a)
        print(f"{name:22s} {f(a):>24s} {f(b):>24s} {ratio:5.2f}x  {same[name]}/{rounds}")


if __name__ == "__main__":
    main()
