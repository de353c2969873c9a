"""A lower bound on the GPT train step's time on this machine, for any implementation, set
against jax.jit's step measured in the same process (issue 4's target is fnad/jax <= 0.5).

The bound counts only work that no implementation of the step can skip, each part at the
best rate this machine reaches in the same run:

- products: the FLOPs of the step's matrix products, as fnad's step hands them to its GEMM
  (gpt_step.gemm_floor records them), less half of the attention's batched products (the
  masked half of a causal attention could be skipped), at the best float32 GEMM rate
  measured here: OpenBLAS (np.matmul) and, where installed, torch.matmul, on 1024³ and
  2048³ products, the best of several calls each;
- AdamW: reading the parameters and both moments and writing them back (6 × 4 bytes per
  parameter; the gradients are taken as free, as if the update were fused into the GEMMs
  that make them), at the best memory bandwidth measured here: a threaded fnad.jit
  elementwise kernel, torch's add (its own threads) and NumPy's copy, on 64M-element
  float32 arrays, counting bytes read plus bytes written.

Everything else (elementwise work, softmax, norms, layout changes) is counted as free.

For scale it also measures the cores' arithmetic peak (`fma_peak`: vector fused
multiply-adds on registers, on one thread and on two at once), which no GEMM reaches: what
the best GEMM rate is of it says how much of the machine the products can use.
Run:

    python benchmarks/gpt_floor.py
"""
from __future__ import annotations

import time

import numpy as np
from _common import header, optional, rounds, table, wait_compiled

import gpt_step as g

BIG = 1 << 26                       # elements in the bandwidth arrays (256 MB each)


def best_s(fn, repeat: int = 7) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gemm_rates(torch) -> dict:
    """GF/s of the best float32 products here, per library and size."""
    rates, rng = {}, np.random.default_rng(0)
    for n in (1024, 2048):
        a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        rates[f"np.matmul {n}³"] = 2 * n ** 3 / best_s(lambda: np.matmul(a, b)) / 1e9
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            rates[f"torch.matmul {n}³"] = 2 * n ** 3 / best_s(lambda: ta @ tb) / 1e9
    return rates


def fma_peak(threads: int, seconds: float = 0.3) -> float:
    """GF/s of float32 fused multiply-adds on `threads` threads at once: independent chains
    of vector FMAs on registers only (no memory traffic), compiled with llvmlite for this
    CPU and called through ctypes (which releases the GIL). Best of three runs."""
    import ctypes
    import threading

    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    features = llvm.get_host_cpu_features()
    lanes, chains = (16, 12) if features.get("avx512f") else (8, 10)  # FMA latency x ports
    vec = f"<{lanes} x float>"

    def splat(v):
        return "<" + ", ".join([f"float {v}"] * lanes) + ">"
    phis = [f"  %a{k} = phi {vec} [{splat('1.0')}, %entry], [%b{k}, %loop]"
            for k in range(chains)]
    fmas = [f"  %b{k} = call {vec} @llvm.fma.v{lanes}f32({vec} %a{k}, {vec} {splat('0.5')}, "
            f"{vec} {splat('1.0')})" for k in range(chains)]
    sums = [f"  %s{k} = fadd {vec} %s{k - 1}, %b{k}" if k > 1 else
            f"  %s1 = fadd {vec} %b0, %b1" for k in range(1, chains)]
    ir = "\n".join([
        f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})",
        "define float @fmas(i64 %n) {", "entry:", "  br label %loop", "loop:",
        "  %i = phi i64 [0, %entry], [%i1, %loop]", *phis, *fmas,
        "  %i1 = add i64 %i, 1", "  %more = icmp ult i64 %i1, %n",
        "  br i1 %more, label %loop, label %exit", "exit:", *sums,
        f"  %r = extractelement {vec} %s{chains - 1}, i32 0", "  ret float %r", "}"])
    tm = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=features.flatten(), opt=2)
    module = llvm.parse_assembly(ir)
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("fmas"))
    n = 1 << 16
    while (dt := best_s(lambda: run(n), 1)) < seconds / 8:     # iterations for ~`seconds`
        n *= 4
    n = int(n * seconds / dt)
    best = 0.0
    for _ in range(3):
        pool = [threading.Thread(target=run, args=(n,)) for _ in range(threads)]
        t0 = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        best = max(best, threads * n * 2 * lanes * chains / (time.perf_counter() - t0) / 1e9)
    return best


def bandwidths(torch) -> dict:
    """GB/s (bytes read + written) of the best streaming passes here, per method."""
    import fnad
    import fnad.numpy as fnp
    x = np.ones(BIG, np.float32)
    out = np.empty_like(x)
    moved = 2 * x.nbytes
    bw = {"np.copyto": moved / best_s(lambda: np.copyto(out, x)) / 1e9}
    fx = fnp.asarray(x)
    double = fnad.jit(lambda v: v * 2.0)
    fnad.block_until_ready(double(fx))
    wait_compiled(double, fx)
    bw["fnad.jit x * 2"] = moved / best_s(lambda: fnad.block_until_ready(double(fx))) / 1e9
    if torch is not None:
        tx, tout = torch.from_numpy(x), torch.from_numpy(out)
        bw["torch.add(out=)"] = moved / best_s(lambda: torch.add(tx, 1.0, out=tout)) / 1e9
    return bw


def main() -> None:
    jax = optional("jax")
    if jax is None:
        raise SystemExit("gpt_floor.py compares against jax.jit: pip install jax")
    torch = optional("torch")
    import fnad
    import fnad.numpy as fnp
    import jax.numpy as jjnp
    params, tokens = g.inputs()
    _, _, jax_step, _, _ = g.run(jax, jjnp, jax.nn, params, tokens, jax.jit)
    _, _, fnad_step, _, _ = g.run(fnad, fnp, fnad.nn, params, tokens, fnad.jit)
    t_jax = float(np.median(rounds({"jax": jax_step}, g.REPEAT, 1, g.WARMUP)["jax"]))

    pairs = [(a.shape, b.shape) for a, b in g.record_products(fnad_step)]
    flops = [2 * np.prod(a) * b[-1] for a, b in pairs]
    attention = sum(f for f, (a, b) in zip(flops, pairs) if len(a) >= 3 and len(b) >= 3)
    needed = sum(flops) - attention / 2

    rates, bw = gemm_rates(torch), bandwidths(torch)
    peaks = {n: fma_peak(n) for n in (1, 2)}
    n_params = sum(np.size(p) for p in fnad.tree_util.tree_leaves(params))
    adamw_bytes = 6 * 4 * n_params
    t_gemm = needed / (max(rates.values()) * 1e9)
    t_adamw = adamw_bytes / (max(bw.values()) * 1e9)
    floor = t_gemm + t_adamw
    print(header())
    rows = [("GPT step", "jax.jit", t_jax),
            ("products, in the bound", f"{max(rates.values()):.0f} GF/s", t_gemm,
             t_gemm / t_jax),
            ("AdamW state read + write", f"{max(bw.values()):.1f} GB/s", t_adamw,
             t_adamw / t_jax),
            ("lower bound of any step", "", floor, floor / t_jax)]
    print(table(rows, "GPT step: a lower bound against jax.jit's step (target 0.5)",
                ratios=("bound/jax",)))
    print(f"{len(pairs)} products, {sum(flops) / 1e9:.2f} GFLOP, of which the attention's "
          f"batched ones {attention / 1e9:.2f}: the bound counts {needed / 1e9:.2f}; AdamW "
          f"over {n_params / 1e6:.2f} M parameters moves {adamw_bytes / 1e6:.0f} MB")
    print("GEMM rates (GF/s): " + ", ".join(f"{k} {v:.0f}" for k, v in rates.items()))
    print("bandwidths (GB/s): " + ", ".join(f"{k} {v:.1f}" for k, v in bw.items()))
    print(f"the cores' float32 FMA peak: {peaks[1]:.0f} GF/s on one thread, {peaks[2]:.0f} on "
          f"two; the best GEMM rate is {max(rates.values()) / peaks[2]:.2f} of the latter")
    print(f"jax.jit step {t_jax * 1e3:.1f} ms; half of it: {t_jax * 500:.1f} ms; "
          f"the bound: {floor * 1e3:.1f} ms = {floor / t_jax:.2f} of jax's step")


if __name__ == "__main__":
    main()
