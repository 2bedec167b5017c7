#!/usr/bin/python3
"""muflow's prompt logits on the trained kjv-mixtral-tiny model match the float64 reference.

F32 weights: max |muflow - reference| <= 1e-4 over every prompt position and vocab entry.
BF16 weights: muflow rounds GEMM inputs to bf16 (unit roundoff u = 2^-8) with f32 accumulation;
the reference runs in float64 on the same (exact) bf16 weights. Per position p let
r_p = max_v |Δ_pv| / max_v |ref_pv|. Require r_p <= 4u at >= 90% of positions, r_p <= 64u
everywhere, and the argmax to agree at >= 90% of positions. See README.md for the measurements
behind these numbers.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    import torch  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: needs python3-numpy and python3-torch ({e})")
    sys.exit(77)
import reference_forward as rf

F32_TOL = 1e-4
U_BF16 = 2.0 ** -8
BF16_BULK = 4 * U_BF16      # per-position relative bound for the bulk of positions
BF16_BULK_FRACTION = 0.90   # ... which must hold at this fraction of positions
BF16_ALL = 64 * U_BF16      # per-position relative bound everywhere (router flips)
ARGMAX_FRACTION = 0.90

# [1] + sentencepiece.encode(text) with the model's tokenizer.model
PROMPTS = {
    "Genesis 1:1-2": (
        "In the beginning God created the heaven and the earth. And the earth was without form, "
        "and void; and darkness was upon the face of the deep.",
        [1, 1026, 261, 2261, 400, 3369, 261, 764, 270, 261, 635, 4057, 300, 261, 635, 374, 1003, 321,
         4048, 4049, 270, 3737, 316, 4062, 270, 1701, 374, 430, 261, 953, 271, 261, 2301, 4057]),
    "Revelation 1:1 (held out)": (
        "The Revelation of Jesus Christ, which God gave unto him, to shew unto his servants things "
        "which must shortly come to pass; and he sent and signified it by his angel unto his servant John:",
        [1, 453, 1196, 323, 2820, 271, 674, 923, 4049, 389, 400, 907, 322, 334, 4049, 293, 977, 322, 327,
         889, 614, 389, 1902, 409, 1077, 442, 499, 293, 613, 4062, 270, 312, 743, 270, 1679, 1318, 358,
         441, 327, 1699, 322, 327, 627, 1801, 4061]),
}


def check_prompt_ids(model_dir):
    sp = rf.load_tokenizer(model_dir)
    if sp is None:
        print("  (python3-sentencepiece not installed: using the stored prompt ids unchecked)")
        return
    for name, (text, ids) in PROMPTS.items():
        assert [1] + list(sp.encode(text)) == ids, f"stored ids of {name} disagree with the tokenizer"


def bf16_verdict(ref, got, what):
    stats = rf.compare_logits(ref, got, what)
    r = np.abs(got.astype(np.float64) - ref).max(axis=1) / np.abs(ref).max(axis=1)
    bulk = float(np.mean(r <= BF16_BULK))
    print(f"  {what}: {stats}; r_p median {np.median(r) / U_BF16:.2f}u, max {r.max() / U_BF16:.2f}u, "
          f"{100 * bulk:.0f}% of positions <= {BF16_BULK / U_BF16:.0f}u")
    return stats, r, bulk


def body(args):
    models = os.path.join(args.data_dir, "models")
    f32_dir = os.path.join(models, "kjv-mixtral-tiny")
    bf16_dir = os.path.join(models, "kjv-mixtral-tiny-bf16")
    if not os.path.isdir(f32_dir) and not os.path.isdir(bf16_dir):
        rf.skip(f"neither {f32_dir} nor {bf16_dir} exists")
    ok = True

    if os.path.isdir(f32_dir):
        check_prompt_ids(f32_dir)
        ref_model = rf.ReferenceModel.load(f32_dir)
        for name, (_, ids) in PROMPTS.items():
            ref = ref_model.forward(ids).numpy()
            got = rf.muflow_logits(args.muflow, f32_dir, ids, os.path.join(args.work_dir, "f32.npy"))
            stats = rf.compare_logits(ref, got, name)
            verdict = stats.max_abs <= F32_TOL
            ok &= verdict
            print(f"  f32 {name} ({len(ids)} tokens): {stats} -> {'ok' if verdict else 'FAIL'} "
                  f"(tolerance {F32_TOL:g})")
    else:
        print(f"  {f32_dir} absent: f32 part skipped")

    if os.path.isdir(bf16_dir):
        ref_model = rf.ReferenceModel.load(bf16_dir)
        emulated = rf.ReferenceModel.load(bf16_dir, emulate_bf16_activations=True)
        for name, (_, ids) in PROMPTS.items():
            ref = ref_model.forward(ids).numpy()
            # what bf16 GEMM inputs alone cost, for context (not a pass/fail criterion)
            bf16_verdict(ref, emulated.forward(ids).numpy().astype(np.float32),
                         f"bf16-emulating reference, {name}")
            got = rf.muflow_logits(args.muflow, bf16_dir, ids, os.path.join(args.work_dir, "bf16.npy"))
            stats, r, bulk = bf16_verdict(ref, got, f"muflow bf16, {name}")
            checks = {
                f">= {BF16_BULK_FRACTION:.0%} of positions r_p <= {BF16_BULK / U_BF16:.0f}u":
                    bulk >= BF16_BULK_FRACTION,
                f"all positions r_p <= {BF16_ALL / U_BF16:.0f}u": bool(r.max() <= BF16_ALL),
                f"argmax agrees at >= {ARGMAX_FRACTION:.0%} of positions":
                    stats.argmax_agree >= ARGMAX_FRACTION * stats.positions,
            }
            for k, v in checks.items():
                if not v:
                    print(f"  bf16 {name}: FAIL: {k}")
                ok &= v
    else:
        print(f"  {bf16_dir} absent: bf16 part skipped")
    return ok


if __name__ == "__main__":
    a = rf.test_args()
    sys.exit(rf.run_test(lambda: body(a)))
