#!/usr/bin/python3
"""Independent float64 reference forward pass for Mixture-of-Experts models (the test oracle).

Reads a Hugging Face model folder (config.json plus model.safetensors, or a sharded
model.safetensors.index.json) with a small safetensors parser written here on numpy, and runs
the forward pass of model_type "mixtral" or "qwen2_moe" in torch float64, following the
Hugging Face semantics of those architectures. It shares no code with muflow: it is the
yardstick muflow's logits are measured against.

Library use:
    model = ReferenceModel.load("path/to/model")
    logits = model.forward([1, 400, 27])          # torch.float64 [num_tokens, vocab]
    result = model.greedy([1, 400, 27], 16)       # GreedyResult(output_ids, margins, ...)

CLI:
    reference_forward.py MODEL_DIR --prompt-ids 1,2,3 --logits-out out.npy [--greedy N]
    reference_forward.py MODEL_DIR --prompt "And God said," --greedy 20
The CLI prints one JSON object: prompt_ids, output_ids (with --greedy), margins, text (when the
folder has a tokenizer.model and python3-sentencepiece is installed).

The lower part of this file holds small helpers shared by the ctest scripts tests/python/test_*.py
(argument parsing, skip exit code 77, running the muflow binary, logit comparison statistics).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

SKIP = 77  # ctest SKIP_RETURN_CODE

# ----------------------------------------------------------------------------------------------
# safetensors
# ----------------------------------------------------------------------------------------------

_NUMPY_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 is the top half of an IEEE float32: shift the uint16 into the top of a uint32."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Returns {name: array}. BF16 tensors come back as exact float32 values; the original
    dtype of each tensor is recorded in the returned dict's attribute-free side table
    read_safetensors.dtypes[path][name]."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short to be a safetensors file")
    (header_len,) = struct.unpack("<Q", raw[:8])
    if 8 + header_len > len(raw):
        raise ValueError(f"{path}: header length {header_len} exceeds the file size {len(raw)}")
    header = json.loads(raw[8:8 + header_len].decode("utf-8"))
    base = 8 + header_len
    out: Dict[str, np.ndarray] = {}
    dtypes: Dict[str, str] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], [int(s) for s in info["shape"]]
        begin, end = (int(o) for o in info["data_offsets"])
        if not (0 <= begin <= end <= len(raw) - base):
            raise ValueError(f"{path}: tensor {name}: data_offsets {begin}..{end} out of range")
        buf = raw[base + begin:base + end]
        count = int(np.prod(shape)) if shape else 1
        if dtype == "BF16":
            if len(buf) != 2 * count:
                raise ValueError(f"{path}: tensor {name}: {len(buf)} bytes for {count} bf16 values")
            arr = bf16_bits_to_f32(np.frombuffer(buf, dtype="<u2"))
        elif dtype in _NUMPY_DTYPES:
            npd = _NUMPY_DTYPES[dtype]
            if len(buf) != npd.itemsize * count:
                raise ValueError(f"{path}: tensor {name}: {len(buf)} bytes for {count} {dtype} values")
            arr = np.frombuffer(buf, dtype=npd).copy()
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        out[name] = arr.reshape(shape)
        dtypes[name] = dtype
    read_safetensors.dtypes[path] = dtypes
    return out


read_safetensors.dtypes = {}  # type: ignore[attr-defined]


def read_model_tensors(model_dir: str) -> Dict[str, np.ndarray]:
    """Loads model.safetensors, or every shard named by model.safetensors.index.json."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        tensors: Dict[str, np.ndarray] = {}
        for shard in sorted(set(weight_map.values())):
            part = read_safetensors(os.path.join(model_dir, shard))
            for name, arr in part.items():
                if name in tensors:
                    raise ValueError(f"{model_dir}: tensor {name} appears in two shards")
                tensors[name] = arr
        missing = [n for n in weight_map if n not in tensors]
        if missing:
            raise ValueError(f"{model_dir}: index names tensors not found in shards: {missing[:5]}")
        return tensors
    if os.path.exists(single):
        return read_safetensors(single)
    raise FileNotFoundError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")


# ----------------------------------------------------------------------------------------------
# the forward pass
# ----------------------------------------------------------------------------------------------


def round_to_bf16(x: torch.Tensor) -> torch.Tensor:
    """Rounds to the nearest bfloat16 (ties to even) by way of float32, back to x's dtype."""
    return x.to(torch.float32).to(torch.bfloat16).to(x.dtype)


@dataclass
class GreedyResult:
    prompt_ids: List[int]
    output_ids: List[int]
    margins: List[float]  # top-1 minus top-2 logit at each generated step
    step_logits: List[np.ndarray] = field(default_factory=list)  # float64 [vocab] per step


class ReferenceModel:
    SUPPORTED = ("mixtral", "qwen2_moe")

    def __init__(self, config: dict, tensors: Dict[str, np.ndarray], emulate_bf16_activations=False,
                 dtype=torch.float64):
        self.config = config
        self.model_type = config.get("model_type")
        if self.model_type not in self.SUPPORTED:
            raise ValueError(f"model_type {self.model_type!r} not supported (want one of {self.SUPPORTED})")
        if config.get("rope_scaling"):
            raise NotImplementedError(f"rope_scaling {config['rope_scaling']!r} is not implemented")
        self.emulate_bf16 = emulate_bf16_activations
        # dtype is float64 for the oracle; float32 only to estimate what f32 arithmetic costs.
        self.dtype = dtype
        self.w = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)).to(dtype) for k, v in tensors.items()}
        c = config
        self.hidden = int(c["hidden_size"])
        self.vocab = int(c["vocab_size"])
        self.layers = int(c["num_hidden_layers"])
        self.heads = int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads") or self.heads)
        self.head_dim = int(c.get("head_dim") or self.hidden // self.heads)
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        self.theta = float(c.get("rope_theta", 10000.0))
        self.topk = int(c["num_experts_per_tok"])
        if self.heads % self.kv_heads:
            raise ValueError(f"num_attention_heads {self.heads} not a multiple of kv heads {self.kv_heads}")
        if self.model_type == "mixtral":
            self.experts = int(c["num_local_experts"])
            self.norm_topk = True
            self.window = c.get("sliding_window")
        else:
            self.experts = int(c["num_experts"])
            self.norm_topk = bool(c.get("norm_topk_prob", False))
            self.window = c.get("sliding_window") if c.get("use_sliding_window", False) else None
        self.tied = bool(c.get("tie_word_embeddings", False))
        self._check_tensors()

    @classmethod
    def load(cls, model_dir: str, emulate_bf16_activations=False, dtype=torch.float64) -> "ReferenceModel":
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        return cls(config, read_model_tensors(model_dir), emulate_bf16_activations, dtype)

    # -- tensor access ---------------------------------------------------------------------

    def t(self, name: str) -> torch.Tensor:
        try:
            return self.w[name]
        except KeyError:
            raise KeyError(f"tensor {name} missing from the model folder") from None

    def _sparse_layer(self, i: int) -> bool:
        if self.model_type == "mixtral":
            return True
        c = self.config
        step = int(c.get("decoder_sparse_step", 1) or 1)
        return (i not in (c.get("mlp_only_layers") or [])) and self.experts > 0 and (i + 1) % step == 0

    def _has_shared(self, i: int) -> bool:
        if self.model_type != "qwen2_moe":
            return False
        p = f"model.layers.{i}.mlp.shared_expert."
        present = (p + "gate_proj.weight") in self.w
        if int(self.config.get("shared_expert_intermediate_size", 0) or 0) > 0 and not present:
            raise KeyError(f"config has a shared expert but {p}gate_proj.weight is missing")
        return present

    def _check_tensors(self):
        need = ["model.embed_tokens.weight", "model.norm.weight"]
        if not self.tied:
            need.append("lm_head.weight")
        for i in range(self.layers):
            p = f"model.layers.{i}."
            need += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
            need += [p + f"self_attn.{n}_proj.weight" for n in "qkvo"]
            if self.model_type == "qwen2_moe":
                need += [p + f"self_attn.{n}_proj.bias" for n in "qkv"]
        missing = [n for n in need if n not in self.w]
        if missing:
            raise KeyError(f"tensors missing from the model folder: {missing[:8]}")
        shp = tuple(self.t("model.embed_tokens.weight").shape)
        if shp != (self.vocab, self.hidden):
            raise ValueError(f"embed_tokens shape {shp} != (vocab {self.vocab}, hidden {self.hidden})")

    # -- building blocks -------------------------------------------------------------------

    def linear(self, x: torch.Tensor, weight: str, bias: Optional[str] = None) -> torch.Tensor:
        """y = x · Wᵀ (+ b). With emulate_bf16 the input is rounded to bf16 first, as a bf16
        GEMM with float32 accumulation would see it (the weights already are bf16 values)."""
        if self.emulate_bf16:
            x = round_to_bf16(x)
        y = x @ self.t(weight).T
        if bias is not None:
            y = y + self.t(bias)
        return y

    def rms_norm(self, x: torch.Tensor, weight: str) -> torch.Tensor:
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.t(weight)

    def rope(self, num_tokens: int):
        d = self.head_dim
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        pos = torch.arange(num_tokens, dtype=torch.float64)
        freqs = torch.outer(pos, inv_freq)                 # [T, d/2]
        emb = torch.cat([freqs, freqs], dim=-1)            # [T, d]
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @staticmethod
    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], dim=-1)

    def attention(self, i: int, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        T, d = x.shape[0], self.head_dim
        p = f"model.layers.{i}.self_attn."
        bias = self.model_type == "qwen2_moe"
        q = self.linear(x, p + "q_proj.weight", p + "q_proj.bias" if bias else None)
        k = self.linear(x, p + "k_proj.weight", p + "k_proj.bias" if bias else None)
        v = self.linear(x, p + "v_proj.weight", p + "v_proj.bias" if bias else None)
        q = q.view(T, self.heads, d).transpose(0, 1)       # [H, T, d]
        k = k.view(T, self.kv_heads, d).transpose(0, 1)    # [KV, T, d]
        v = v.view(T, self.kv_heads, d).transpose(0, 1)
        q = q * cos + self.rotate_half(q) * sin
        k = k * cos + self.rotate_half(k) * sin
        group = self.heads // self.kv_heads
        kv_of_head = torch.arange(self.heads) // group     # head h reads kv head h // group
        k, v = k[kv_of_head], v[kv_of_head]
        scores = (q @ k.transpose(1, 2)) / math.sqrt(d)    # [H, T, T]
        qi = torch.arange(T).view(T, 1)
        kj = torch.arange(T).view(1, T)
        masked = kj > qi
        if self.window is not None and T > int(self.window):
            masked = masked | (qi - kj >= int(self.window))
        scores = scores.masked_fill(masked, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = (probs @ v).transpose(0, 1).reshape(T, self.heads * d)
        return self.linear(out, p + "o_proj.weight")

    def swiglu(self, x: torch.Tensor, gate: str, up: str, down: str) -> torch.Tensor:
        h = torch.nn.functional.silu(self.linear(x, gate)) * self.linear(x, up)
        return self.linear(h, down)

    def expert_names(self, i: int, e: int):
        if self.model_type == "mixtral":
            p = f"model.layers.{i}.block_sparse_moe.experts.{e}."
            return p + "w1.weight", p + "w3.weight", p + "w2.weight"
        p = f"model.layers.{i}.mlp.experts.{e}."
        return p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight"

    def moe(self, i: int, x: torch.Tensor, trace: Optional[dict]) -> torch.Tensor:
        if not self._sparse_layer(i):  # qwen2_moe dense layer
            p = f"model.layers.{i}.mlp."
            return self.swiglu(x, p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight")
        gate = (f"model.layers.{i}.block_sparse_moe.gate.weight" if self.model_type == "mixtral"
                else f"model.layers.{i}.mlp.gate.weight")
        router_logits = self.linear(x, gate)               # [T, E]
        probs = torch.softmax(router_logits, dim=-1)
        weights, chosen = torch.topk(probs, self.topk, dim=-1)
        if self.norm_topk:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(self.experts):
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            if rows.numel() == 0:
                continue
            y = self.swiglu(x[rows], *self.expert_names(i, e))
            out.index_add_(0, rows, y * weights[rows, slot].unsqueeze(-1))
        if self._has_shared(i):
            p = f"model.layers.{i}.mlp."
            shared = self.swiglu(x, p + "shared_expert.gate_proj.weight", p + "shared_expert.up_proj.weight",
                                 p + "shared_expert.down_proj.weight")
            out = out + torch.sigmoid(self.linear(x, p + "shared_expert_gate.weight")) * shared
        if trace is not None:
            trace.setdefault("experts", []).append(chosen.numpy().copy())
            trace.setdefault("expert_weights", []).append(weights.numpy().copy())
        return out

    # -- whole model -----------------------------------------------------------------------

    def forward(self, ids: Sequence[int], trace: Optional[dict] = None) -> torch.Tensor:
        """Logits of every position, float64 [len(ids), vocab]. If trace is a dict, it gets
        trace['experts'][layer] = int array [T, topk] and trace['expert_weights'][layer]."""
        ids = [int(t) for t in ids]
        if not ids:
            raise ValueError("empty prompt")
        bad = [t for t in ids if not 0 <= t < self.vocab]
        if bad:
            raise ValueError(f"token ids out of range [0, {self.vocab}): {bad[:5]}")
        T = len(ids)
        with torch.no_grad():
            x = self.t("model.embed_tokens.weight")[torch.tensor(ids)].clone()
            cos, sin = self.rope(T)
            for i in range(self.layers):
                p = f"model.layers.{i}."
                x = x + self.attention(i, self.rms_norm(x, p + "input_layernorm.weight"), cos, sin)
                x = x + self.moe(i, self.rms_norm(x, p + "post_attention_layernorm.weight"), trace)
            x = self.rms_norm(x, "model.norm.weight")
            head = "model.embed_tokens.weight" if self.tied else "lm_head.weight"
            return self.linear(x, head)

    def greedy(self, prompt_ids: Sequence[int], max_new_tokens: int, stop_at_eos=False,
               keep_logits=False) -> GreedyResult:
        """Greedy continuation by recomputing the full forward at each step (no KV cache, so
        nothing is shared with an incremental implementation). Does not stop at EOS unless
        asked to."""
        ids = [int(t) for t in prompt_ids]
        res = GreedyResult(list(ids), [], [])
        eos = self.config.get("eos_token_id")
        for _ in range(max_new_tokens):
            last = self.forward(ids)[-1]
            top2 = torch.topk(last, 2)
            nxt = int(top2.indices[0])
            res.output_ids.append(nxt)
            res.margins.append(float(top2.values[0] - top2.values[1]))
            if keep_logits:
                res.step_logits.append(last.numpy().copy())
            ids.append(nxt)
            if stop_at_eos and nxt == eos:
                break
        return res


# ----------------------------------------------------------------------------------------------
# tokenizer (optional: python3-sentencepiece)
# ----------------------------------------------------------------------------------------------


def load_tokenizer(model_dir: str):
    """Returns a sentencepiece processor, or None if there is no tokenizer.model or the
    python3-sentencepiece package is not installed."""
    path = os.path.join(model_dir, "tokenizer.model")
    if not os.path.exists(path):
        return None
    try:
        import sentencepiece  # noqa: WPS433
    except ImportError:
        return None
    return sentencepiece.SentencePieceProcessor(model_file=path)


def encode_prompt(model_dir: str, text: str, bos: int = 1) -> List[int]:
    sp = load_tokenizer(model_dir)
    if sp is None:
        raise RuntimeError(f"cannot encode text: no tokenizer.model in {model_dir} or no python3-sentencepiece")
    return [bos] + list(sp.encode(text))


def parse_ids(text: str) -> List[int]:
    return [int(t) for t in text.replace(" ", "").split(",") if t]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt-ids", help="comma-separated token ids (include BOS yourself)")
    g.add_argument("--prompt", help="text; encoded as [bos] + sentencepiece(text)")
    ap.add_argument("--logits-out", help="write float64 logits [num_prompt_tokens, vocab] as .npy")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="greedy-decode N tokens")
    ap.add_argument("--stop-at-eos", action="store_true")
    ap.add_argument("--emulate-bf16-activations", action="store_true",
                    help="round every GEMM input to bf16 (diagnostic for bf16 tolerances)")
    args = ap.parse_args(argv)

    model = ReferenceModel.load(args.model_dir, args.emulate_bf16_activations)
    bos = int(model.config.get("bos_token_id", 1) or 1)
    ids = parse_ids(args.prompt_ids) if args.prompt_ids else encode_prompt(args.model_dir, args.prompt, bos)
    out = {"prompt_ids": ids}
    logits = model.forward(ids)
    if args.logits_out:
        np.save(args.logits_out, logits.numpy())
    out["last_argmax"] = int(torch.argmax(logits[-1]))
    if args.greedy:
        res = model.greedy(ids, args.greedy, stop_at_eos=args.stop_at_eos)
        out["output_ids"] = res.output_ids
        out["margins"] = [round(m, 6) for m in res.margins]
        sp = load_tokenizer(args.model_dir)
        if sp is not None:
            out["text"] = sp.decode(res.output_ids)
    print(json.dumps(out))
    return 0


# ----------------------------------------------------------------------------------------------
# helpers for the ctest scripts (tests/python/test_*.py)
# ----------------------------------------------------------------------------------------------


class MuflowError(RuntimeError):
    pass


def test_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--muflow", required=True, help="path to the muflow binary")
    ap.add_argument("--data-dir", required=True, help="../shared/data")
    ap.add_argument("--work-dir", required=True, help="scratch directory")
    args = ap.parse_args(argv)
    os.makedirs(args.work_dir, exist_ok=True)
    return args


def skip(why: str):
    print(f"SKIPPED: {why}")
    sys.stdout.flush()
    sys.exit(SKIP)


def run_muflow(muflow: str, args: List[str], timeout=300) -> str:
    """Runs `muflow ARGS`; returns stdout. Raises MuflowError with a message that says what
    was run and what came back."""
    cmd = [muflow] + [str(a) for a in args]
    shown = " ".join(cmd)
    if not os.path.exists(muflow):
        raise MuflowError(f"muflow binary not found at {muflow} (is the CLI built?)\n  command: {shown}")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise MuflowError(f"muflow timed out after {timeout}s\n  command: {shown}") from None
    except OSError as e:
        raise MuflowError(f"cannot run muflow: {e}\n  command: {shown}") from None
    if p.returncode != 0:
        raise MuflowError(
            f"muflow exited with status {p.returncode} — does this muflow implement this "
            f"command/flag yet?\n  command: {shown}\n  stderr (tail):\n{_tail(p.stderr)}\n"
            f"  stdout (tail):\n{_tail(p.stdout)}")
    return p.stdout


def _tail(s: str, n=2000) -> str:
    s = s or ""
    return "    " + s[-n:].replace("\n", "\n    ")


def parse_json_stdout(stdout: str) -> dict:
    """The last line of stdout that parses as a JSON object."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    try:
        return json.loads(stdout)
    except json.JSONDecodeError:
        raise MuflowError(f"muflow --json printed no JSON object on stdout:\n{_tail(stdout)}") from None


def muflow_logits(muflow: str, model_dir: str, ids: Sequence[int], out_path: str, extra=()) -> np.ndarray:
    if os.path.exists(out_path):
        os.remove(out_path)
    run_muflow(muflow, ["generate", "--model", model_dir, "--prompt-ids", ",".join(map(str, ids)),
                        "--max-new-tokens", "1", "--logits-out", out_path, *extra])
    if not os.path.exists(out_path):
        raise MuflowError(f"muflow generate --logits-out did not write {out_path}")
    arr = np.load(out_path)
    if arr.dtype != np.float32:
        raise MuflowError(f"{out_path}: dtype {arr.dtype}, the contract says float32")
    return arr


@dataclass
class LogitStats:
    max_abs: float
    max_rel: float       # max_abs / max |reference logit|
    worst_pos: int
    argmax_agree: int
    positions: int

    def __str__(self):
        return (f"max|Δ|={self.max_abs:.3e} (relative to max|ref| {self.max_rel:.3e}, worst at position "
                f"{self.worst_pos}), argmax agrees at {self.argmax_agree}/{self.positions} positions")


def compare_logits(ref: np.ndarray, got: np.ndarray, what: str) -> LogitStats:
    if tuple(got.shape) != tuple(ref.shape):
        raise MuflowError(f"{what}: muflow logits shape {tuple(got.shape)} != reference {tuple(ref.shape)}")
    if not np.all(np.isfinite(got)):
        raise MuflowError(f"{what}: muflow logits contain NaN/Inf")
    diff = np.abs(got.astype(np.float64) - ref)
    worst = int(np.unravel_index(np.argmax(diff), diff.shape)[0])
    agree = int(np.sum(np.argmax(got, axis=-1) == np.argmax(ref, axis=-1)))
    return LogitStats(float(diff.max()), float(diff.max() / max(np.abs(ref).max(), 1e-30)), worst, agree,
                      ref.shape[0])


def make_model(muflow: str, out_dir: str, **kw) -> str:
    """`muflow make-model --out OUT_DIR --key value ...` (underscores become dashes)."""
    args = ["make-model", "--out", out_dir]
    for k, v in kw.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    run_muflow(muflow, args)
    if not os.path.exists(os.path.join(out_dir, "config.json")):
        raise MuflowError(f"muflow make-model wrote no config.json in {out_dir}")
    return out_dir


def muflow_greedy(muflow: str, model_dir: str, n: int, ids: Optional[Sequence[int]] = None,
                  text: Optional[str] = None, extra=()) -> dict:
    args = ["generate", "--model", model_dir, "--max-new-tokens", str(n), "--json", *extra]
    args += ["--prompt-ids", ",".join(map(str, ids))] if ids is not None else ["--prompt", text]
    out = parse_json_stdout(run_muflow(muflow, args))
    for key in ("prompt_ids", "output_ids"):
        if not isinstance(out.get(key), list):
            raise MuflowError(f"muflow --json output has no list {key!r}: {json.dumps(out)[:500]}")
    return out


NEAR_TIE = 1e-3


def compare_greedy(ref: GreedyResult, got: Sequence[int], eos: Optional[int], what: str) -> int:
    """Checks muflow's greedy ids against the reference up to the first step whose reference
    top-2 margin is <= NEAR_TIE. Returns how many tokens were compared. Raises AssertionError."""
    got = [int(t) for t in got]
    n = len(ref.output_ids)
    if len(got) > n:
        hint = " (does output_ids include the prompt?)" if got[:len(ref.prompt_ids)] == ref.prompt_ids else ""
        raise AssertionError(f"{what}: muflow returned {len(got)} tokens for --max-new-tokens {n}{hint}")
    checked = 0
    for step in range(n):
        if ref.margins[step] <= NEAR_TIE:
            print(f"  {what}: near-tie at step {step} (reference margin {ref.margins[step]:.2e}); "
                  f"comparison stops there")
            return checked
        if step >= len(got):
            if got and got[-1] == eos:
                print(f"  {what}: muflow stopped at EOS after {len(got)} tokens")
                return checked
            raise AssertionError(f"{what}: muflow returned only {len(got)} tokens, want {n}; got {got}")
        if got[step] != ref.output_ids[step]:
            raise AssertionError(
                f"{what}: greedy token {step} differs: muflow {got[step]}, reference {ref.output_ids[step]} "
                f"(reference margin {ref.margins[step]:.3e})\n  reference: {ref.output_ids}\n  muflow:    {got}")
        checked += 1
    return checked


def run_test(body) -> int:
    """Runs body() and maps failures to exit status 1 with a clear message."""
    try:
        ok = body()
    except MuflowError as e:
        print(f"FAILED (muflow): {e}")
        return 1
    except AssertionError as e:
        print(f"FAILED: {e}")
        return 1
    if ok is not None and not bool(ok):
        print("FAILED")
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
