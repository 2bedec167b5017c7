#!/usr/bin/python3
"""muflow's prompt logits on synthetic models from `muflow make-model` match the float64 reference.

Covers what the trained KJV model does not: qwen2_moe (q/k/v bias, shared expert with its sigmoid
gate, norm_topk_prob 0 and 1), a KV group of 4, head_dim != hidden / heads, top-1 and top-4
routing, and a checkpoint sharded with model.safetensors.index.json. F32 weights; max |Δ| <= 1e-4.
Needs no data directory.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    import torch  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: needs python3-numpy and python3-torch ({e})")
    sys.exit(77)
import reference_forward as rf

TOL = 1e-4
PROMPT_LEN = 24

MODELS = {
    "mixtral": dict(type="mixtral", vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16,
                    experts=8, topk=2, ffn=96, seed=11),
    "mixtral-gqa4-hd32-top1": dict(type="mixtral", vocab=384, hidden=64, layers=3, heads=8, kv_heads=2,
                                   head_dim=32, experts=4, topk=1, ffn=80, seed=12),
    "qwen2_moe-shared-norm0": dict(type="qwen2_moe", vocab=512, hidden=64, layers=2, heads=4, kv_heads=2,
                                   head_dim=16, experts=8, topk=4, ffn=48, shared_ffn=128,
                                   norm_topk_prob=0, seed=13),
    "qwen2_moe-shared-norm1": dict(type="qwen2_moe", vocab=512, hidden=64, layers=2, heads=4, kv_heads=4,
                                   head_dim=16, experts=6, topk=2, ffn=48, shared_ffn=96,
                                   norm_topk_prob=1, seed=14),
    "mixtral-sharded": dict(type="mixtral", vocab=512, hidden=64, layers=2, heads=4, kv_heads=2,
                            head_dim=16, experts=8, topk=2, ffn=96, seed=15, shard_bytes=200000),
    "qwen2_moe-sharded": dict(type="qwen2_moe", vocab=256, hidden=64, layers=2, heads=4, kv_heads=1,
                              head_dim=16, experts=4, topk=2, ffn=64, shared_ffn=64, norm_topk_prob=1,
                              seed=16, shard_bytes=100000),
}


def prompt_for(vocab, seed):
    rng = np.random.default_rng(seed)
    return [1] + [int(t) for t in rng.integers(3, vocab, PROMPT_LEN - 1)]


def body(args):
    ok = True
    for name, spec in MODELS.items():
        out = os.path.join(args.work_dir, name)
        shutil.rmtree(out, ignore_errors=True)
        rf.make_model(args.muflow, out, **spec)
        if "shard_bytes" in spec:
            assert os.path.exists(os.path.join(out, "model.safetensors.index.json")), \
                f"{name}: --shard-bytes {spec['shard_bytes']} wrote no model.safetensors.index.json"
        ref_model = rf.ReferenceModel.load(out)
        ids = prompt_for(spec["vocab"], spec["seed"])
        ref = ref_model.forward(ids).numpy()
        got = rf.muflow_logits(args.muflow, out, ids, os.path.join(args.work_dir, name + ".npy"))
        stats = rf.compare_logits(ref, got, name)
        verdict = stats.max_abs <= TOL
        ok &= verdict
        print(f"  {name}: {stats}, max|ref| {np.abs(ref).max():.3g} -> {'ok' if verdict else 'FAIL'} "
              f"(tolerance {TOL:g})")
    return ok


if __name__ == "__main__":
    a = rf.test_args()
    sys.exit(rf.run_test(lambda: body(a)))
