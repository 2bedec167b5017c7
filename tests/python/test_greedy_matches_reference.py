#!/usr/bin/python3
"""muflow's greedy continuation equals the float64 reference's greedy continuation.

The reference decodes by recomputing the whole forward pass at every step (no KV cache), so this
also checks muflow's incremental decode. Token ids are compared up to the first step at which the
reference's top-1 minus top-2 logit is <= 1e-3 (a near-tie: an f32 engine may legitimately pick
either, and from there the two continuations are on different contexts). If muflow stops at EOS,
the comparison ends there.

Parts: kjv-mixtral-tiny (F32, needs the data dir; with python3-sentencepiece also the --prompt TEXT
path and its [bos] + sentencepiece(text) encoding), and a synthetic mixtral and qwen2_moe from
`muflow make-model` (no data needed).
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np  # noqa: F401
    import torch  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: needs python3-numpy and python3-torch ({e})")
    sys.exit(77)
import reference_forward as rf

N_KJV = 24
N_SYNTH = 16

KJV_PROMPTS = {
    # a complete verse: the model continues with EOS, BOS, "Speak unto the children of Israel, ..."
    "And the LORD spake unto Moses, saying,": [1, 300, 261, 340, 810, 322, 676, 4049, 547, 4049],
    "In the beginning God created": [1, 1026, 261, 2261, 400, 3369],
}

SYNTH = {
    "mixtral": dict(type="mixtral", vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16,
                    experts=8, topk=2, ffn=96, seed=21),
    "qwen2_moe": dict(type="qwen2_moe", vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16,
                      experts=8, topk=2, ffn=48, shared_ffn=128, norm_topk_prob=0, seed=22),
}


def check(model, model_dir, ids, n, what, muflow, text=None):
    ref = model.greedy(ids, n)
    got = rf.muflow_greedy(muflow, model_dir, n, ids=None if text else ids, text=text)
    if text is not None:
        assert [int(t) for t in got["prompt_ids"]] == ids, \
            f"{what}: muflow encoded the prompt as {got['prompt_ids']}, want [bos] + sentencepiece = {ids}"
    compared = rf.compare_greedy(ref, got["output_ids"], model.config.get("eos_token_id"), what)
    print(f"  {what}: {compared}/{n} greedy tokens equal the reference (min reference margin over "
          f"them {min(ref.margins[:max(compared, 1)]):.3g}); muflow: {got['output_ids']}")
    if "text" in got:
        print(f"    muflow text: {got['text']!r}")
    return compared


def body(args):
    ran = False
    kjv = os.path.join(args.data_dir, "models", "kjv-mixtral-tiny")
    if os.path.isdir(kjv):
        ran = True
        model = rf.ReferenceModel.load(kjv)
        sp = rf.load_tokenizer(kjv)
        for text, ids in KJV_PROMPTS.items():
            if sp is not None:
                assert [1] + list(sp.encode(text)) == ids, f"stored ids of {text!r} disagree with the tokenizer"
            check(model, kjv, ids, N_KJV, f"kjv {text!r} (ids)", args.muflow)
            if sp is not None:
                check(model, kjv, ids, N_KJV, f"kjv {text!r} (text)", args.muflow, text=text)
        if sp is None:
            print("  python3-sentencepiece not installed: the --prompt TEXT path is not checked")
    else:
        print(f"  {kjv} absent: KJV part skipped")

    for name, spec in SYNTH.items():
        ran = True
        out = os.path.join(args.work_dir, name)
        shutil.rmtree(out, ignore_errors=True)
        rf.make_model(args.muflow, out, **spec)
        model = rf.ReferenceModel.load(out)
        ids = [1, 5, 77, 300, 12, 9, 410, 33]
        check(model, out, ids, N_SYNTH, f"synthetic {name}", args.muflow)
    return ran


if __name__ == "__main__":
    a = rf.test_args()
    sys.exit(rf.run_test(lambda: body(a)))
