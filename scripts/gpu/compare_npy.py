"""Compares two folders of .npy outputs: max abs error and relative L2 error per output.
usage: compare_npy.py REF_DIR GOT_DIR [--max-abs X] [--rel-l2 Y]   (exit 1 when over a bound)"""
import argparse, glob, os, sys
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("ref")
ap.add_argument("got")
ap.add_argument("--max-abs", type=float)
ap.add_argument("--rel-l2", type=float)
a = ap.parse_args()
bad = False
for f in sorted(glob.glob(os.path.join(a.ref, "*.npy"))):
    r = np.load(f).astype(np.float64)
    g = np.load(os.path.join(a.got, os.path.basename(f))).astype(np.float64)
    if r.shape != g.shape:
        print(f"{os.path.basename(f)}: shape {g.shape} != {r.shape}")
        bad = True
        continue
    mabs = float(np.max(np.abs(r - g))) if r.size else 0.0
    rel = float(np.linalg.norm(r - g) / max(np.linalg.norm(r), 1e-30))
    ok = (a.max_abs is None or mabs <= a.max_abs) and (a.rel_l2 is None or rel <= a.rel_l2) and np.isfinite(g).all()
    bad |= not ok
    print(f"{os.path.basename(f)}: max abs {mabs:.3g}, rel L2 {rel:.3g} {'ok' if ok else 'OVER BOUND'}")
sys.exit(1 if bad else 0)
