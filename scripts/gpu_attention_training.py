"""Attention in a training step on a GPU (lesson 15, issue 41): forward and forward+backward of
torch's SDPA flash back-end (FlashAttention-2) against naive attention, bf16, 16 heads, d = 64 and
128, N = 1k, 4k, 16k at 16k tokens per call, in TFLOP/s with peak memory
(:func:`course_lib.attention_kernels.benchmark_gpu_training`); then the lesson's own fused forward
kernel against SDPA flash at d = 128 (:func:`course_lib.attention_kernels.benchmark_gpu`).

usage: python scripts/gpu_attention_training.py [--out DIR]   (writes DIR/attention_training.json)
Needs a CUDA GPU that Triton compiles for; elsewhere it says so and exits 2."""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/gpu-check")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_attention_training: no CUDA GPU here; nothing measured", file=sys.stderr)
        return 2
    from course_lib import attention_kernels

    device = torch.cuda.get_device_name(0)
    print(f"measured on {device}, torch {torch.__version__}, bf16, 16 heads, 16384 tokens per call")
    rows = []
    for d in (64, 128):
        rows += attention_kernels.benchmark_gpu_training(d=d)
    for r in rows:
        print(f"{r['implementation']:30s} {r['pass']:17s} N = {r['seq_len']:5d} d = {r['d']:3d}: "
              f"{r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s peak {r['peak_bytes'] / 2**30:6.2f} GiB "
              f"max error {r['max_error']:.3g} {r['note']}")
    fused = attention_kernels.benchmark_gpu(seq_lens=(4096, 16384), d=128)
    for r in fused:
        print(f"forward d = 128 {r['implementation']:28s} N = {r['seq_len']:5d}: {r['ms']:8.3f} ms "
              f"{r['tflops']:7.1f} TFLOP/s peak {r['peak_bytes'] / 2**30:6.2f} GiB {r['note']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "attention_training.json").write_text(json.dumps({"device": device, "torch": torch.__version__,
                                                             "training": rows, "fused_forward_d128": fused},
                                                            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
