"""fp16 baseline for scripts/gpu/conv8/run.sh: ResNet-50's conv shapes (the same deduplicated list, in the
same order, as bench.cu) through torch.nn.functional.conv2d in fp16 channels_last (cuDNN, with
torch.backends.cudnn.benchmark), conv only (no bias / ReLU). Median of 20 launches, each timed by its
own CUDA events, after warm-up. Rows: tag N idx H W C K R S stride relu mult ms TOP/s.
Usage: python3 ref.py [N ...]  (default 256 32). No fp8 line: torch has no fp8 convolution."""
import sys
import torch
import torch.nn.functional as F


def out_dim(h, r, st):
    return (h + 2 * (r // 2) - r) // st + 1


def resnet50_shapes():
    v = []  # dicts in first-appearance order, identical shapes merged with a multiplicity

    def add(H, C, K, R, st, relu):
        for e in v:
            if (e["H"], e["C"], e["K"], e["R"], e["st"], e["relu"]) == (H, C, K, R, st, relu):
                e["mult"] += 1
                return
        v.append(dict(H=H, C=C, K=K, R=R, st=st, relu=relu, mult=1))

    h, cin = 56, 64
    for l, (nb, w) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        cout = 4 * w
        for b in range(nb):
            st = 2 if (b == 0 and l > 0) else 1
            ho = out_dim(h, 3, st)
            add(h, cin, w, 1, 1, 1)       # 1x1 reduce + ReLU
            add(h, w, w, 3, st, 1)        # 3x3 + ReLU (stride 2 in the first block of layers 2-4)
            add(ho, w, cout, 1, 1, 0)     # 1x1 expand (residual add follows)
            if b == 0:
                add(h, cin, cout, 1, st, 0)  # 1x1 downsample
            h, cin = ho, cout
    return v


def median_ms(f, warm=5, it=20):
    for _ in range(warm):
        f()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(it)]
    torch.cuda._sleep(20_000_000)  # ~10 ms of GPU spin: the launches below queue up behind it
    for a, b in ev:
        a.record()
        f()
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    return t[len(t) // 2]


def main():
    ns = [int(a) for a in sys.argv[1:]] or [256, 32]
    torch.backends.cudnn.benchmark = True
    tag = "torch16"
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}: "
          "fp16 channels_last F.conv2d (conv only), cudnn.benchmark")
    shapes = resnet50_shapes()
    for n in ns:
        print(f"# {tag}\n{'tag':<8} {'N':>4} {'idx':>3} {'H':>3} {'W':>3} {'C':>5} {'K':>5} R S st relu {'x':>2} {'ms':>9} {'TOP/s':>6}")
        total = 0.0
        for i, s in enumerate(shapes):
            H, C, K, R, st = s["H"], s["C"], s["K"], s["R"], s["st"]
            x = torch.randn(n, C, H, H, dtype=torch.half, device="cuda").to(memory_format=torch.channels_last)
            w = (torch.randn(K, C, R, R, dtype=torch.half, device="cuda") * 0.05).to(memory_format=torch.channels_last)
            ms = median_ms(lambda: F.conv2d(x, w, None, st, R // 2))
            p = out_dim(H, R, st)
            tops = 2.0 * n * p * p * K * C * R * R / (ms * 1e-3) / 1e12
            print(f"{tag:<8} {n:4d} {i:3d} {H:3d} {H:3d} {C:5d} {K:5d} {R} {R} {st} {s['relu']} {s['mult']:2d} {ms:9.4f} {tops:6.0f}")
            total += ms * s["mult"]
            del x, w
        print(f"TOTAL {tag} {n} {total:.4f} ms")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
