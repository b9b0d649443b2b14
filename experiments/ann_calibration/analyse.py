import glob
import sys

import numpy as np

K = 200


def recall_at(ranks, p):  # mean recall when probing p cells
    return float((ranks < p).mean())


def min_p(ranks, target, nlist):
    lo, hi = 1, nlist
    while lo < hi:
        mid = (lo + hi) // 2
        if recall_at(ranks, mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def share(z, key, p, n, nlist):
    return (nlist + z[key][p - 1]) / n


if __name__ == "__main__":
    targets = [float(t) for t in (sys.argv[2].split(",") if len(sys.argv) > 2 else "0.95,0.97,0.99".split(","))]
    for path in sorted(
        glob.glob(sys.argv[1] if len(sys.argv) > 1 else "curves_*.npz"),
        key=lambda p: tuple(map(int, p[7:-4].split("_"))),
    ):
        n, c = map(int, path[7:-4].split("_"))
        z = np.load(path)
        nlist = len(z["sizes"])
        line = [f"n={n} c={c} nlist={nlist}"]
        for q in ("unseen", "dev1000"):
            p = min_p(z[f"q_{q}"], 0.95, nlist)
            line.append(f"oracle[{q}] p={p} ({p / nlist:.1%}) scan={share(z, 's_' + q, p, n, nlist):.1%}")
        print("  ".join(line))
        for pr in ("self", "doc", "mix_random", "mix_near"):
            out = []
            for t in targets:
                p = min_p(z[f"p_{pr}"], t, nlist)
                out.append(
                    f"t={t}: p={p} scan={share(z, 's_unseen', p, n, nlist):.1%} unseen={recall_at(z['q_unseen'], p):.3f} dev={recall_at(z['q_dev1000'], p):.3f}"
                )
            print(f"   {pr:10s} " + " | ".join(out))
