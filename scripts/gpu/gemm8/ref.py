"""PyTorch's GEMMs at BERT-base b256 shapes (scripts/gpu/gemm8/run.sh): torch._int_mm (cuBLASLt int8,
s32 out), f16 matmul and torch._scaled_mm (fp8 e4m3, f16 out), us per call (CUDA events, 50 calls)."""
import torch, time
M=32768
def t(f, it=50):
    for _ in range(5): f()
    torch.cuda.synchronize(); e0=torch.cuda.Event(enable_timing=True); e1=torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(it): f()
    e1.record(); torch.cuda.synchronize(); return e0.elapsed_time(e1)*1000/it
tot8=tot16=totf8=0
for name,n,k in [("qkv",2304,768),("out",768,768),("ffn1",3072,768),("ffn2",768,3072)]:
    a=torch.randint(-127,127,(M,k),dtype=torch.int8,device="cuda"); b=torch.randint(-127,127,(n,k),dtype=torch.int8,device="cuda")
    u8=t(lambda: torch._int_mm(a,b.t()))
    ah=torch.randn(M,k,dtype=torch.half,device="cuda"); bh=torch.randn(n,k,dtype=torch.half,device="cuda")
    u16=t(lambda: ah@bh.t())
    a8=ah.to(torch.float8_e4m3fn); b8=bh.to(torch.float8_e4m3fn); one=torch.tensor(1.0,device="cuda")
    uf8=t(lambda: torch._scaled_mm(a8,b8.t(),scale_a=one,scale_b=one,out_dtype=torch.half))
    f=2*M*n*k/1e12
    print(f"{name} n={n} k={k}: int_mm(s32) {u8:.1f} us {f/u8*1e6:.0f} TOP/s | f16 {u16:.1f} us {f/u16*1e6:.0f} | fp8->f16 {uf8:.1f} us {f/uf8*1e6:.0f}")
    tot8+=u8; tot16+=u16; totf8+=uf8
print(f"layer x12: int_mm {tot8*12/1000:.3f} ms, f16 {tot16*12/1000:.3f} ms, fp8 {totf8*12/1000:.3f} ms")
