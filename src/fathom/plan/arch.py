"""A decoder-only transformer's shape, and the arithmetic a plan reads from it: parameters, the KV
cache per token, and the FLOPs of a prefill.

Every formula assumes the common layout of the presets: grouped-query attention (``heads`` query
heads of ``head_dim``, ``kv_heads`` key/value heads), a gated MLP of three matrices (SwiGLU,
GeGLU), RMS norms, and for a mixture of experts ``experts`` such MLPs per layer of which
``experts_used`` run per token. Biases are left out (Qwen's q/k/v biases are under 0.01% of its
parameters). docs/plan.md derives each formula.
"""

from __future__ import annotations

from dataclasses import dataclass

# Bytes per stored value, by the names --kv-dtype and --weights-dtype take.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


@dataclass(frozen=True)
class Architecture:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # each expert's, for a mixture of experts
    vocab: int
    tied_embeddings: bool = False  # one matrix is both the input embedding and the output head
    experts: int = 0  # 0: a dense MLP
    experts_used: int = 0
    # Layers that attend only to the last ``sliding_window`` positions (Gemma 2 every other layer,
    # Gemma 3 five in six); the others attend to the whole prompt.
    sliding_window: int | None = None
    sliding_layers: int = 0
    context: int | None = None  # the trained window
    # Where a model file says exactly (a GGUF's tensors): its parameter count and the bytes of its
    # weights as stored (quantised). None: counted from the shape, stored at --weights-dtype.
    exact_params: int | None = None
    stored_bytes: int | None = None
    source: str = ""  # the preset's published config, or the file read

    @property
    def attention_params(self) -> int:
        """One layer's q, k, v and o projections."""
        return self.hidden * self.head_dim * 2 * (self.heads + self.kv_heads)

    @property
    def expert_params(self) -> int:
        """One gated MLP: gate, up and down projections."""
        return 3 * self.hidden * self.intermediate

    @property
    def routed(self) -> int:
        """MLPs per token: the experts a token is routed to, or the one dense MLP."""
        return self.experts_used if self.experts else 1

    @property
    def token_params(self) -> int:
        """The weights every prompt token is multiplied by: each layer's attention projections,
        the MLPs it is routed to and the router. Not the embedding table (a lookup), nor the
        output head, which a prefill runs on the last position only."""
        return self.layers * (
            self.attention_params + self.routed * self.expert_params + self.hidden * self.experts
        )

    @property
    def params(self) -> int:
        """All parameters: the file's count where it gives one, else from the shape (norms included)."""
        if self.exact_params is not None:
            return self.exact_params
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        mlps = max(self.experts, 1) * self.expert_params + self.hidden * self.experts
        return embeddings + self.layers * (self.attention_params + mlps + 2 * self.hidden) + self.hidden

    @property
    def active_params(self) -> int:
        """The parameters one token reads: all of them less the experts it is not routed to."""
        idle = max(self.experts - self.experts_used, 0) if self.experts else 0
        return self.params - self.layers * idle * self.expert_params

    def kv_bytes_per_token(self, bytes_per_value: float) -> float:
        """K and V of every layer: layers x KV heads x head dim x 2 x bytes per value. Sliding-window
        layers are counted in full, as llama.cpp stores them with ``swa_full`` (fathom's setting)."""
        return self.layers * self.kv_heads * self.head_dim * 2 * bytes_per_value

    def activation_bytes(self, chunk: int, cache: int, value_bytes: float, scores: bool) -> float:
        """The peak transient memory of one forward pass over ``chunk`` new tokens with ``cache``
        tokens (those included) in the KV cache. Layers run one after another, so one layer's
        transients count once: the residual stream and its normed copy (2 x chunk x hidden), plus
        the larger of the MLP's gate, up and their product (3 x chunk x intermediate, for each
        expert a token is routed to) and attention's q, k and v (chunk x (heads + 2 KV heads) x
        head dim) with, where ``scores`` are materialised, the fp32 scores of the chunk's queries
        against the cache (heads x chunk x cache); ``value_bytes`` a value. Then the last token's
        logits in fp32 (vocab): a generation needs no other position's."""
        stream = 2 * chunk * self.hidden * value_bytes
        mlp = 3 * chunk * self.routed * self.intermediate * value_bytes
        attention = chunk * (self.heads + 2 * self.kv_heads) * self.head_dim * value_bytes
        if scores:
            attention += 4.0 * self.heads * chunk * cache
        return stream + max(mlp, attention) + 4.0 * self.vocab

    def weight_flops(self, tokens: int) -> float:
        """Multiply-adds with the weights, 2 FLOPs each: every new prompt token through the layers,
        and the output head once, for the first answer token's logits."""
        return 2.0 * self.token_params * tokens + 2.0 * self.vocab * self.hidden

    def attention_flops(self, length: int, cached: int = 0) -> float:
        """QK^T and AV over the causal mask for the queries from position ``cached`` to ``length``:
        2 x head_dim FLOPs per (query, key) pair for each product, per query head and layer."""
        full = self.layers - self.sliding_layers
        pairs = full * causal_pairs(length, cached, None)
        if self.sliding_layers:
            pairs += self.sliding_layers * causal_pairs(length, cached, self.sliding_window)
        return 4.0 * self.heads * self.head_dim * pairs

    def prefill_flops(self, length: int, cached: int = 0) -> float:
        """A prefill of ``length`` tokens whose first ``cached`` a prefix cache already holds."""
        return self.weight_flops(length - cached) + self.attention_flops(length, cached)


def causal_pairs(length: int, cached: int, window: int | None) -> int:
    """(query, key) pairs under a causal mask for queries ``cached`` .. ``length - 1``: query q sees
    keys 0 .. q, or only the last ``window`` of them."""

    def upto(n: int) -> int:  # queries 0 .. n - 1
        if window is None or n <= window:
            return n * (n + 1) // 2
        return window * (window + 1) // 2 + (n - window) * window

    return upto(length) - upto(cached)
