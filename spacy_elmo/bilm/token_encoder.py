"""The context-independent token encoder: char CNN + highway + projection."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .chars import PADDING_CHAR
from .config import BiLMConfig
from .errors import InputError
from .lexicon import PADDING_ID as LEXICON_PADDING_ID
from .precision import (
    MANY_ROWS,
    ONE_SENTENCE_ROWS,
    WINDOWS_PER_WORD,
    ProductSite,
    ReducedProduct,
    ReducibleProducts,
    linear_source,
)
from .products import linear, matmul, unique_rows, uses_host_cache
from .token_cache import TokenVectorCache

PADDING_ID = PADDING_CHAR + 1
"""The shifted id of the character that fills a token's row after its end-of-word character."""
LENGTH_GROUP_BOUNDS = (8, 12, 20)
"""Content lengths (with the begin/end-of-word characters) at which rows go to a new group."""
GROUPED_MIN_ROWS = 128
"""From this many rows up, rows are convolved in length groups. Fewer rows (a sentence's new word
types) run as one group: there, each group's own calls cost more than the windows it saves (on an
AMD EPYC the small shape's encoder took 1.07-1.34x as long in groups at 8 to 64 rows, and 0.81x
at 256)."""


class Highway(ReducibleProducts):
    """One highway layer in bilm-tf's convention: `y = t * relu(W_T x + b_T) + (1 - t) * x`.

    `t = sigmoid(W_C x + b_C)` (bilm-tf calls it the "carry" gate although it weights the
    transformed branch). Both maps live in one `Linear(F, 2F)`: transform rows first, then gate
    rows, so a layer costs one matrix product.
    """

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width
        self.linear = nn.Linear(width, 2 * width)

    def product_sites(self) -> dict[str, ProductSite]:
        return {"linear": linear_site(self.linear)}

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (N, F) -> (N, F)."""
        outputs = linear(self.linear, inputs, self.reduced.get("linear"))
        transform, gate = outputs.split(self.width, dim=-1)
        gate = torch.sigmoid(gate)
        return gate * F.relu(transform) + (1.0 - gate) * inputs


class CharCNNTokenEncoder(ReducibleProducts):
    """Char ids (N, C) -> token vectors (N, P): embedding, convolutions, max-pool, highway, projection.

    The embedding table has `n_characters - 1 = 261` learned rows for ids 1..261; id 0 (padding)
    always maps to a zero vector, so the parameter count equals the published layout's. A lexicon
    model (`config.uses_lexicon`) has a row per lexicon id instead, and with `config.word_dim` a
    word embedding (row 0 of word id 0 zero too) whose vector is concatenated to the highway
    output before the projection: `[highway (F); word (W)] -> P`.
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.config = config
        self.char_embedding = nn.Parameter(torch.empty(config.char_embedding_rows, config.char_embedding_dim))
        self.padding_id = LEXICON_PADDING_ID if config.uses_lexicon else PADDING_ID
        self.word_embedding = (
            nn.Parameter(torch.empty(config.n_words, config.word_dim)) if config.word_dim else None
        )
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_dim, n_filters, kernel_size=width)
            for width, n_filters in config.filters
        )
        self.highways = nn.ModuleList(Highway(config.n_filters) for _ in range(config.n_highway))
        self.projection = nn.Linear(config.token_features, config.projection_dim)
        self.activation = torch.tanh if config.activation == "tanh" else F.relu

    def product_sites(self) -> dict[str, ProductSite]:
        """The projection and each filter width's convolution (the highways are modules of their
        own). The convolutions run in float32 or bf16, not int8: their inputs are a handful of
        embedding rows."""
        sites = {"projection": linear_site(self.projection)}
        for index, convolution in enumerate(self.convolutions):
            kernel = _kernel_source(convolution)
            sites[f"convolution{index}"] = ProductSite(
                "matmul",
                kernel,
                [convolution.weight],
                lambda inputs, reduced, kernel=kernel: matmul(inputs, kernel()[0], reduced),
                (ONE_SENTENCE_ROWS * WINDOWS_PER_WORD, MANY_ROWS * WINDOWS_PER_WORD),
                modes=("fp32", "bf16"),
            )
        return sites

    def forward(self, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
        """char_ids (N, C) int64, shifted ids (0 = padding), word_ids (N,) with a word embedding
        (0 = no word) -> (N, P) token vectors."""
        table = F.pad(self.char_embedding, (0, 0, 1, 0))  # row 0 = padding, all zeros
        convolution_products = [
            self.reduced.get(f"convolution{index}") for index in range(len(self.convolutions))
        ]
        if all(
            isinstance(product, ReducedProduct) and product.precision == "bf16"
            for product in convolution_products
        ):
            table = table.to(torch.bfloat16)  # every width casts its windows to bf16 at every row count
        kernels: list[Callable[[torch.Tensor], torch.Tensor]] = [  # (.., width * d) -> (.., n) per width
            functools.partial(
                matmul,
                weight=_kernel_source(convolution)()[0],
                reduced=product,
            )
            for convolution, product in zip(self.convolutions, convolution_products)
        ]
        lengths = content_lengths(char_ids, self.padding_id)
        pooled: list[torch.Tensor] = []
        row_groups: list[torch.Tensor] = []
        for rows in length_groups(lengths, char_ids.shape[1]):
            pooled.append(self._convolve_and_pool(table, kernels, char_ids[rows], int(lengths[rows].max())))
            row_groups.append(rows)
        hidden = torch.cat(pooled)[torch.argsort(torch.cat(row_groups))]  # (N, F), input order
        for highway in self.highways:
            hidden = highway(hidden)  # (N, F)
        if self.word_embedding is not None:
            if word_ids is None:
                raise InputError("This biLM has a word embedding: give word ids (N,) with the char ids.")
            word_vectors = F.embedding(word_ids, F.pad(self.word_embedding, (0, 0, 1, 0)))  # (N, W)
            hidden = torch.cat([hidden, word_vectors.to(hidden.dtype)], dim=-1)  # (N, F + W)
        return linear(self.projection, hidden, self.reduced.get("projection"))

    def _convolve_and_pool(
        self,
        table: torch.Tensor,
        kernels: list[Callable[[torch.Tensor], torch.Tensor]],
        char_ids: torch.Tensor,
        content_length: int,
    ) -> torch.Tensor:
        """Every filter width as one matrix product over the windows, max over time, activation.

        char_ids (n, C), rows whose content ends by position `content_length` -> (n, F). Same
        values as `conv1d` + max-pool over all C positions (the bias is added after the max, which
        monotone rounding makes exact), at a fraction of the cost: a window lying wholly in a
        row's trailing padding scores the same for every word, so those windows are scored once
        per width instead of once per row and position. Faster on a CPU than `conv1d` even before
        that, with these narrow inputs (`bench/bench_bilm.py` times the whole encoder).
        """
        n_rows, n_chars = char_ids.shape
        content_length = max(content_length, 1)
        widths = [convolution.kernel_size[0] for convolution in self.convolutions]
        embedded = F.embedding(char_ids[:, : min(n_chars, content_length + max(widths) - 1)], table)
        pads_with_padding_char = (char_ids[:, -1] == self.padding_id).unsqueeze(1)  # (n, 1)
        outputs: list[torch.Tensor] = []
        for convolution, kernel, width in zip(self.convolutions, kernels, widths):
            all_positions = n_chars - width + 1
            n_positions = min(content_length, all_positions)
            windows = (
                embedded[:, : n_positions + width - 1]
                .unfold(1, width, 1)
                .transpose(2, 3)
                .reshape(n_rows * n_positions, width * embedded.shape[-1])
            )
            scores = kernel(windows).view(n_rows, n_positions, -1).amax(dim=1)
            if n_positions < all_positions:  # the windows of padding alone: zeros, or the padding char
                padding_score = kernel(table[self.padding_id].repeat(width))  # (n,)
                scores = torch.maximum(scores, torch.where(pads_with_padding_char, padding_score, 0.0))
            outputs.append(self.activation(scores.to(convolution.bias.dtype) + convolution.bias))
        return torch.cat(outputs, dim=-1)

    def encode_types(
        self,
        char_ids: torch.Tensor,
        cache: TokenVectorCache | None = None,
        word_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Encode (..., C) char ids, running the CNN once per distinct row (word type).

        Returns (..., P). Repeated words in a batch cost nothing extra; gradients flow back to
        every occurrence through the gather. With a `cache` (a CPU fast path, used only when no
        gradient is recorded), word types seen in earlier calls are not encoded again; on a GPU
        the encoder runs on every type, which costs less than moving keys to the host. With a
        word embedding, `word_ids` (...) joins each row as its last column, so a type is its char
        row and its word id (two words can share a char row: unknown characters, cut tokens).
        """
        if word_ids is not None:
            char_ids = torch.cat([char_ids, word_ids.unsqueeze(-1)], dim=-1)  # (..., C + 1)
        unique_ids, inverse = unique_rows(char_ids.reshape(-1, char_ids.shape[-1]))
        if cache is not None and uses_host_cache(char_ids) and cache.usable_for(self):
            encoded = self._encode_with_cache(unique_ids, cache)
        else:
            encoded = self._encode_rows(unique_ids)
        return encoded[inverse].reshape(*char_ids.shape[:-1], encoded.shape[-1])

    def _encode_with_cache(self, unique_ids: torch.Tensor, cache: TokenVectorCache) -> torch.Tensor:
        """unique_ids (U, C) -> (U, P), encoding only the rows the cache does not hold."""
        keys = [row.tobytes() for row in unique_ids.numpy()]
        vectors = cache.get_many(keys)
        missing = [index for index, vector in enumerate(vectors) if vector is None]
        if missing:
            fresh = self._encode_rows(unique_ids[missing])
            cache.put_many((keys[index] for index in missing), fresh)
            for index, vector in zip(missing, fresh):
                vectors[index] = vector
        return torch.stack(vectors)  # type: ignore[arg-type]

    def _encode_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """(U, C) char ids, or (U, C + 1) with the word id last when there is a word embedding -> (U, P)."""
        if self.word_embedding is None:
            return self(rows)
        return self(rows[:, :-1], rows[:, -1])


def linear_site(layer: nn.Linear) -> ProductSite:
    """An `nn.Linear` of the token encoder (a highway, the projection) as a product site: it sees
    a sentence's or a batch's new word types."""
    return ProductSite(
        "linear",
        linear_source(layer),
        list(layer.parameters()),
        lambda inputs, reduced: linear(layer, inputs, reduced),
        (ONE_SENTENCE_ROWS, MANY_ROWS),
    )


def _kernel_source(convolution: nn.Conv1d) -> Callable[[], tuple[torch.Tensor, None]]:
    """A convolution's weight as one (width * d, n) matrix over a flattened window, no bias (the
    bias is added after the max-pool)."""
    return lambda: (convolution.weight.permute(2, 1, 0).reshape(-1, convolution.out_channels), None)


def content_lengths(char_ids: torch.Tensor, padding_id: int = PADDING_ID) -> torch.Tensor:
    """(N, C) char ids -> (N,) where each row's trailing run of padding (id 0 or the padding
    character `padding_id`) starts; C for a row that does not end in padding."""
    last = char_ids[:, -1]
    trailing = (char_ids == last.unsqueeze(1)).flip(1).cumprod(dim=1).sum(dim=1)
    ends_in_padding = (last == 0) | (last == padding_id)
    return torch.where(ends_in_padding, char_ids.shape[1] - trailing, char_ids.shape[1])


def length_groups(lengths: torch.Tensor, n_chars: int) -> list[torch.Tensor]:
    """Row indices grouped by content length (bounds `LENGTH_GROUP_BOUNDS`), empty groups left out,
    so that one long word does not make a whole batch convolve over its length; one group of every
    row below `GROUPED_MIN_ROWS` rows."""
    if 0 < len(lengths) < GROUPED_MIN_ROWS:
        return [torch.arange(len(lengths), device=lengths.device)]
    groups: list[torch.Tensor] = []
    lower = -1
    for upper in [bound for bound in LENGTH_GROUP_BOUNDS if bound < n_chars] + [n_chars]:
        rows = torch.nonzero((lengths > lower) & (lengths <= upper)).squeeze(1)
        if len(rows):
            groups.append(rows)
        lower = upper
    return groups
