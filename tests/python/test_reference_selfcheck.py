#!/usr/bin/python3
"""Checks the oracle itself (does not run muflow): safetensors parsing (F32, BF16, shards),
causality, GQA head mapping, router invariances, and, when the data dir has it, that the float64
reference reproduces what kjv-mixtral-tiny's README says about the trained model.
"""
import json
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIPPED: needs python3-numpy and python3-torch ({e})")
    sys.exit(77)
import reference_forward as rf


def write_safetensors(path, tensors, bf16=False):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        if bf16:
            bits = np.asarray(arr, np.float32).view(np.uint32)
            # round to nearest even into the top 16 bits
            data = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes()
        else:
            data = np.asarray(arr, "<f4").tobytes()
        header[name] = {"dtype": "BF16" if bf16 else "F32", "shape": list(arr.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def random_model(kind, rng, vocab=64, hidden=32, layers=2, heads=4, kv=2, hd=8, experts=4, topk=2, ffn=24,
                 shared=16, norm=False):
    cfg = {"model_type": kind, "vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "num_experts_per_tok": topk, "tie_word_embeddings": False,
           "eos_token_id": 2, "bos_token_id": 1}
    t = {}

    def r(*shape, s=0.2):
        return rng.standard_normal(shape).astype(np.float32) * s

    t["model.embed_tokens.weight"] = r(vocab, hidden, s=1.0)
    t["lm_head.weight"] = r(vocab, hidden)
    t["model.norm.weight"] = 1 + r(hidden, s=0.1)
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + r(hidden, s=0.1)
        t[p + "post_attention_layernorm.weight"] = 1 + r(hidden, s=0.1)
        for n, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
            t[p + f"self_attn.{n}_proj.weight"] = r(rows, hidden)
            if kind == "qwen2_moe":
                t[p + f"self_attn.{n}_proj.bias"] = r(rows)
        t[p + "self_attn.o_proj.weight"] = r(hidden, heads * hd)
        for e in range(experts):
            if kind == "mixtral":
                q = p + f"block_sparse_moe.experts.{e}."
                t[q + "w1.weight"], t[q + "w3.weight"], t[q + "w2.weight"] = r(ffn, hidden), r(ffn, hidden), r(hidden, ffn)
            else:
                q = p + f"mlp.experts.{e}."
                t[q + "gate_proj.weight"], t[q + "up_proj.weight"], t[q + "down_proj.weight"] = \
                    r(ffn, hidden), r(ffn, hidden), r(hidden, ffn)
        if kind == "mixtral":
            t[p + "block_sparse_moe.gate.weight"] = r(experts, hidden, s=1.0)
        else:
            t[p + "mlp.gate.weight"] = r(experts, hidden, s=1.0)
            if shared:
                q = p + "mlp.shared_expert."
                t[q + "gate_proj.weight"], t[q + "up_proj.weight"], t[q + "down_proj.weight"] = \
                    r(shared, hidden), r(shared, hidden), r(hidden, shared)
                t[p + "mlp.shared_expert_gate.weight"] = r(1, hidden)
    if kind == "mixtral":
        cfg.update(num_local_experts=experts, intermediate_size=ffn)
    else:
        cfg.update(num_experts=experts, moe_intermediate_size=ffn, shared_expert_intermediate_size=shared,
                   norm_topk_prob=norm, intermediate_size=ffn)
    return cfg, t


def save(dirname, cfg, tensors, bf16=False, shards=1):
    shutil.rmtree(dirname, ignore_errors=True)
    os.makedirs(dirname)
    with open(os.path.join(dirname, "config.json"), "w") as f:
        json.dump(cfg, f)
    if shards == 1:
        write_safetensors(os.path.join(dirname, "model.safetensors"), tensors, bf16)
        return
    names = list(tensors)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        write_safetensors(os.path.join(dirname, fname), part, bf16)
        weight_map.update({n: fname for n in part})
    with open(os.path.join(dirname, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def close(a, b, tol=1e-10):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max()) <= tol


def body(args):
    rng = np.random.default_rng(7)
    w = args.work_dir
    ids = [1, 5, 9, 33, 2, 60, 17, 17, 40, 3, 8, 55]

    # bf16 bit patterns
    bits = np.array([0x3F80, 0xC000, 0x0000, 0x8000, 0x7F80, 0x3E80], np.uint16)
    got = rf.bf16_bits_to_f32(bits)
    assert list(got[:4]) == [1.0, -2.0, 0.0, -0.0] and np.isinf(got[4]) and got[5] == 0.25, got
    print("  bf16 bit patterns ok")

    for kind in ("mixtral", "qwen2_moe"):
        cfg, t = random_model(kind, rng)
        save(os.path.join(w, kind), cfg, t)
        save(os.path.join(w, kind + "-sharded"), cfg, t, shards=3)
        save(os.path.join(w, kind + "-bf16"), cfg, t, bf16=True)
        m = rf.ReferenceModel.load(os.path.join(w, kind))
        base = m.forward(ids).numpy()
        assert close(rf.ReferenceModel.load(os.path.join(w, kind + "-sharded")).forward(ids).numpy(), base, 0)
        loaded = rf.read_model_tensors(os.path.join(w, kind))
        assert all(np.array_equal(loaded[n], t[n]) for n in t), "f32 round trip"
        lb = rf.read_model_tensors(os.path.join(w, kind + "-bf16"))
        want = torch.from_numpy(t["lm_head.weight"]).to(torch.bfloat16).to(torch.float32).numpy()
        assert np.array_equal(lb["lm_head.weight"], want), "bf16 parse != torch's bf16 rounding"
        print(f"  {kind}: safetensors single / sharded / bf16 ok")

        # causality: the first j rows do not depend on later tokens
        for j in (1, 5, len(ids) - 1):
            assert close(m.forward(ids[:j]).numpy(), base[:j]), f"{kind}: causality at {j}"
        print(f"  {kind}: causal")

        # GQA: heads 4 over kv 2 == kv 4 with each kv head duplicated (head h uses kv h // 2)
        t2, cfg2 = dict(t), dict(cfg, num_key_value_heads=4)
        hd = cfg["head_dim"]
        for i in range(cfg["num_hidden_layers"]):
            for n in ("k", "v"):
                for suffix in ("weight", "bias"):
                    key = f"model.layers.{i}.self_attn.{n}_proj.{suffix}"
                    if key in t:
                        blocks = [t[key][g * hd:(g + 1) * hd] for g in (0, 0, 1, 1)]
                        t2[key] = np.concatenate(blocks, axis=0)
        assert close(rf.ReferenceModel(cfg2, t2).forward(ids).numpy(), base), f"{kind}: GQA mapping"
        print(f"  {kind}: GQA head mapping")

        # identical experts + renormalised top-k: the router cannot matter
        t3 = dict(t)
        cfg3 = dict(cfg, norm_topk_prob=True)
        for key in list(t3):
            if ".experts." in key:
                e = key.split(".experts.")[1].split(".")[0]
                t3[key] = t[key.replace(f".experts.{e}.", ".experts.0.")]
        gate = "block_sparse_moe.gate.weight" if kind == "mixtral" else "mlp.gate.weight"
        a = rf.ReferenceModel(cfg3, t3).forward(ids).numpy()
        t4 = dict(t3)
        for i in range(cfg["num_hidden_layers"]):
            t4[f"model.layers.{i}.{gate}"] = rng.standard_normal(t[f"model.layers.{i}.{gate}"].shape)
        assert close(rf.ReferenceModel(cfg3, t4).forward(ids).numpy(), a), f"{kind}: router invariance"
        # and top-k = all experts makes norm_topk_prob irrelevant
        if kind == "qwen2_moe":
            c5 = dict(cfg, num_experts_per_tok=cfg["num_experts"])
            assert close(rf.ReferenceModel(dict(c5, norm_topk_prob=False), t).forward(ids).numpy(),
                         rf.ReferenceModel(dict(c5, norm_topk_prob=True), t).forward(ids).numpy())
            # a zero shared expert is the same as none
            t6 = {k: v for k, v in t.items() if "shared_expert" not in k}
            t7 = dict(t)
            for i in range(cfg["num_hidden_layers"]):
                k = f"model.layers.{i}.mlp.shared_expert.down_proj.weight"
                t7[k] = np.zeros_like(t[k])
            assert close(rf.ReferenceModel(dict(cfg, shared_expert_intermediate_size=0), t6).forward(ids).numpy(),
                         rf.ReferenceModel(cfg, t7).forward(ids).numpy())
        print(f"  {kind}: router invariances")

    kjv = os.path.join(args.data_dir, "models", "kjv-mixtral-tiny")
    if os.path.isdir(kjv):
        m = rf.ReferenceModel.load(kjv)
        moses = [1, 300, 261, 340, 810, 322, 676, 4049, 547, 4049]
        g = m.greedy(moses, 8)
        # EOS, BOS, "Speak unto the children of Israel," per the model's README
        assert g.output_ids == [2, 1, 2486, 322, 261, 493, 271, 433], g.output_ids
        gen = [1, 1026, 261, 2261, 400, 3369, 261, 764, 270, 261, 635, 4057]
        ce = float(torch.nn.functional.cross_entropy(m.forward(gen)[:-1], torch.tensor(gen[1:])))
        assert ce < 5.0, f"cross-entropy {ce} on Genesis 1:1 is implausible for the trained model"
        print(f"  kjv-mixtral-tiny: README's greedy continuation reproduced; Genesis 1:1 CE {ce:.2f}")
    else:
        print(f"  {kjv} absent: KJV sanity part skipped")
    return True


if __name__ == "__main__":
    a = rf.test_args()
    sys.exit(rf.run_test(lambda: body(a)))
