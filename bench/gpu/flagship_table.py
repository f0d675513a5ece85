#!/usr/bin/env python3
"""The table of bench/gpu/flagship.sh (and gpt2.sh), from the logs it leaves in WORK:

    python3 bench/gpu/flagship_table.py WORK "eager compile-rog compile" SECONDS [gpt|gpt2]

WORK/gpu (the GPU's name), WORK/ours.{out,err,rc} (our program's stdout, its
--profile on stderr, its exit status), WORK/torch_MODE.{out,err}
(gpt_torch_gpu.py's output: RESULT and PEAK lines). Plain python3, no NumPy
(the GPU machine's system python has none).

Our step time is the --profile region table's `for step (...gpt.spmd:N)` row:
rank 0's median time of an iteration of the training loop, [min-max] over
every step (the first steps, with the device's warm-up, included in the
max). The program's own `ms/step` of each PRINT_EVERY-step window (its wall
clock between two prints, which read the loss and so wait for the device)
is listed below the table. PyTorch's is the median over its timed steps,
each between torch.cuda.synchronize() calls.

The model (default gpt, the flagship, f32) picks the title, the peaks MFU is
given over (gpt2: GPT-2 small in bf16, over the measured cuBLAS bf16 GEMM
peak and the datasheet's dense bf16 figure) and the last line's first word
(FLAGSHIP or GPT2).
"""
import os
import re
import sys

# FP32 (non-tensor-core) datasheet peaks, TFLOP/s: the ceiling of an f32
# step without TF32 (ours without SPMD_TF32, PyTorch with allow_tf32 off)
DATASHEET_F32 = [("H100 PCIe", 51.2), ("H100 NVL", 60.0), ("H200 NVL", 60.0), ("H100", 66.9), ("H200", 66.9)]
# dense BF16 tensor-core datasheet peaks (no sparsity), TFLOP/s: H100 SXM
# and H200 989.4, H100 PCIe 756.5, H100 NVL and H200 NVL 835.5
DATASHEET_BF16 = [("H100 PCIe", 756.5), ("H100 NVL", 835.5), ("H200 NVL", 835.5), ("H100", 989.4), ("H200", 989.4)]
MODELS = {
    "gpt": dict(title="flagship GPT (examples/gpt.spmd)", precision="f32, no TF32", peak="f32",
                sheet=DATASHEET_F32, tag="FLAGSHIP"),
    "gpt2": dict(title="GPT-2 small (examples/gpt2_small.spmd)", precision="bf16 compute, f32 master weights",
                 peak="bf16", sheet=DATASHEET_BF16, tag="GPT2"),
}

STEP_ROW = re.compile(r"^for step \((.*?)\)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \[([\d.]+)-([\d.]+)\]", re.M)
PROG_LINE = re.compile(r"^step (\d+) train (\S+) .*ms/step (\S+) tok/s (\S+)", re.M)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


def ours(work):
    """{ms, min, max, tokens, loss, windows, source} or {failed}."""
    out, err, rc = read(os.path.join(work, "ours.out")), read(os.path.join(work, "ours.err")), read(os.path.join(work, "ours.rc")).strip()
    lines = [(int(s), float(loss), float(ms), float(tok)) for s, loss, ms, tok in PROG_LINE.findall(out)]
    r = {"windows": [(s, ms) for s, _, ms, _ in lines]}
    if lines:
        _, loss, ms, tok = lines[-1]
        r["loss"] = loss
        r["tokens"] = round(tok * ms / 1000.0)          # tokens per step: B * T
    m = STEP_ROW.search(err)
    if rc != "0" or not lines:
        why = {"124": "timed out", "137": "timed out (killed)", "127": "no program"}.get(rc, f"exit {rc or '?'}")
        r["failed"] = why
        r["tail"] = (err.strip().splitlines() or ["(no output)"])[-5:]
        return r
    if m:
        r.update(ms=float(m.group(5)), min=float(m.group(6)), max=float(m.group(7)),
                 source=f"--profile, for step ({m.group(1)}): median of {m.group(2)} steps")
    elif len(lines) > 1:
        later = [ms for _, _, ms, _ in lines[1:]]
        r.update(ms=sum(later) / len(later), min=min(later), max=max(later),
                 source="no --profile region table: the mean of the program's windows after the first")
    else:
        r["failed"] = "no --profile region table and one window"
        r["tail"] = err.strip().splitlines()[-5:]
    return r


def torch_run(work, mode):
    out = read(os.path.join(work, f"torch_{mode}.out"))
    res = [l for l in out.splitlines() if l.startswith("RESULT ")]
    peak = [l for l in out.splitlines() if l.startswith("PEAK ")]
    f = fields(res[-1]) if res else {"failed": "no RESULT line"}
    r = {"peak": fields(peak[-1]) if peak else {}}
    if "failed" in f:
        r["failed"] = f["failed"].replace("_", " ")
        r["tail"] = [l for l in read(os.path.join(work, f"torch_{mode}.err")).strip().splitlines() if l.strip()][-5:]
        return r
    r.update(ms=float(f["ms_per_step_median"]), min=float(f["min"]), max=float(f["max"]),
             tokens=float(f["tokens_per_s"]) * float(f["ms_per_step_median"]) / 1000.0,
             loss=float(f["final_loss"]), compile_s=float(f["compile_s"]),
             flops=float(f["model_tflops_per_step"]) * 1e12, attn=f.get("attn", "?"), steps=f.get("steps", "?"))
    return r


def main():
    work, modes, seconds = sys.argv[1], sys.argv[2].split(), sys.argv[3]
    model = MODELS[sys.argv[4] if len(sys.argv) > 4 else "gpt"]
    prec = model["peak"]
    gpu = read(os.path.join(work, "gpu")).strip()
    rows = [("spmdc --target=cuda", ours(work))]
    names = {"eager": "torch eager", "compile": "torch.compile", "compile-rog": "torch.compile r-o (graphs)"}
    runs = {m: torch_run(work, m) for m in modes}
    rows += [(names.get(m, m), runs[m]) for m in modes]
    flops = next((r["flops"] for _, r in rows if "flops" in r), None)
    peak = next((r["peak"] for r in runs.values() if r["peak"]), {})
    sheet = next((v for k, v in model["sheet"] if k in gpu), None)
    tokens = next((r["tokens"] for _, r in rows if "tokens" in r), None)

    print(f"{model['title']}, one training step (batch, loss and gradient, clipping, "
          f"schedule, AdamW; {model['precision']}) on 1 GPU: {gpu}")
    line = []
    if tokens:
        line.append(f"{tokens:.0f} tokens/step")
    if flops:
        line.append(f"model FLOPs {flops / 1e9:.2f} GFLOP/step")
    if peak:
        line.append(f"cuBLAS GEMM peak measured: f32 {peak.get('f32_gemm_tflops')} TFLOP/s, "
                    f"bf16 {peak.get('bf16_gemm_tflops')}")
    line.append(f"{prec} datasheet peak {sheet} TFLOP/s" if sheet else f"{prec} datasheet peak: unknown GPU")
    print("; ".join(line))
    ref = {m: runs[m]["ms"] for m in modes if "ms" in runs[m]}
    head = f"{'run':28} {'ms/step median [min-max]':>30} {'tokens/s':>10}"
    head += "".join(f" {'x ' + m:>14}" for m in modes)
    head += f" {'MFU meas':>9} {'MFU sheet':>9} {'compile s':>9} {'train loss':>10}"
    print(head)
    for name, r in rows:
        if "ms" not in r:
            print(f"{name:28} FAILED: {r.get('failed', '?')}")
            continue
        ms = r["ms"]
        spread = "%.3f [%.3f-%.3f]" % (ms, r["min"], r["max"])
        tok = r.get("tokens") or tokens
        achieved = flops / (ms / 1000) / 1e12 if flops else None
        meas = float(peak[f"{prec}_gemm_tflops"]) if peak.get(f"{prec}_gemm_tflops") else None
        cells = [spread.rjust(30), ("%.0f" % (tok / ms * 1000) if tok else "?").rjust(10)]
        cells += [("%.2fx" % (ref[m] / ms) if m in ref else "-").rjust(14) for m in modes]
        cells += [("%.1f%%" % (100 * achieved / meas) if achieved and meas else "-").rjust(9),
                  ("%.1f%%" % (100 * achieved / sheet) if achieved and sheet else "-").rjust(9),
                  ("%.1f" % r["compile_s"] if "compile_s" in r else "-").rjust(9),
                  ("%.4f" % r["loss"] if "loss" in r else "-").rjust(10)]
        print(f"{name:28} " + " ".join(cells))
    print("(x MODE: that PyTorch mode's median ms/step over this row's, > 1 is faster than it; "
          f"MFU: model FLOPs / median step / peak, measured {prec} GEMM or datasheet {prec}; "
          "train loss: the mean over the last PRINT_EVERY steps)")
    o = rows[0][1]
    if o.get("windows"):
        print("ours, the program's ms/step per window (steps up to): "
              + ", ".join(f"{ms:.3f} ({s})" for s, ms in o["windows"]))
    if o.get("source"):
        print(f"ours: {o['source']}")
    for name, r in rows:
        if "ms" not in r and r.get("tail"):
            print(f"{name} failed ({r.get('failed')}); the end of its output:")
            print("\n".join("  " + l for l in r["tail"]))
    for m in modes:     # what makes a compiled mode slower than it should be, said on its stderr
        err = read(os.path.join(work, f"torch_{m}.err")).splitlines()
        notes = [l.strip() for l in err if re.search(r"skipping cudagraphs|graph\(s\) compiled during|"
                                                       r"recompil|cache_size_limit", l, re.I)]
        for l in dict.fromkeys(notes).keys() if len(notes) else []:
            print(f"note ({m}): {l[:300]}")
    attn = {r.get("attn") for _, r in rows[1:] if "attn" in r}
    if attn:
        print(f"PyTorch attention: {', '.join(sorted(attn))}; timed steps {rows[1][1].get('steps', '?')} "
              f"after the warm-up; the script took {seconds} s")
    summary = " ".join(f"{k}={rows[i][1]['ms']:.4f}" for i, k in enumerate(["ours_ms"] + [m.replace('-', '_') + "_ms" for m in modes])
                       if "ms" in rows[i][1])
    print(f"{model['tag']} gpu={gpu.replace(' ', '_') or '?'} {summary}")


if __name__ == "__main__":
    main()
