"""`BiLM`: char ids -> the L + 1 ELMo layers of every token."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from . import products
from .auto_precision import PrecisionPlan, default_cache_dir, measured_plan, uniform_plan
from .batching import BatchOrder, budget_batches
from .chars import batch_to_ids, bos_token_ids, eos_token_ids, validate_sentences
from .config import BiLMConfig
from .errors import ConfigError, InputError
from .io.allennlp import load_allennlp_weights, save_allennlp_weights
from .io.elmoformanylangs import read_elmoformanylangs
from .io.model_dir import load_model_dir, read_lexicon, save_model_dir
from .io.state_dict import StateDictShapes, state_dict_shapes
from .lexicon import (
    SENTENCE_END_ROW,
    SENTENCE_END_WORD_ID,
    SENTENCE_START_ROW,
    SENTENCE_START_WORD_ID,
    Lexicon,
    boundary_token_ids,
)
from .lstm import DIRECTION_NAMES, LSTMStack, LSTMState
from .precision import PrecisionChoice, ProductSite, ReducibleProducts, check_precision, gpu_auto_precision
from .threads import THREAD_POLICY
from .token_cache import TokenVectorCache
from .token_encoder import CharCNNTokenEncoder

CharIds = tuple[torch.Tensor, torch.Tensor | None]
"""char ids (B, T, C) and, for a model with a word embedding, word ids (B, T)."""


class BiLM(nn.Module):
    """ELMo's bidirectional language model: char CNN token encoder + two LSTM stacks.

    Without autograd, token-encoder outputs are cached per word type (`token_cache_size` entries,
    least recently used dropped first; 0 turns it off); weight changes invalidate the cache.

    Stateless by default: every call starts from zero states, so outputs do not depend on batch
    order or composition. With `stateful=True` the final (h, c) of every layer and direction is kept
    per batch row and used as the next call's initial state, as AllenNLP and bilm-tf do;
    `reset_states()` forgets them.

    A lexicon model (`config.uses_lexicon`: ELMoForManyLangs) turns text into ids with its
    `lexicon`, which `load` and `from_elmoformanylangs` read with the weights.
    """

    def __init__(
        self,
        config: BiLMConfig,
        *,
        lexicon: Lexicon | None = None,
        stateful: bool = False,
        token_cache_size: int = 50_000,
    ) -> None:
        super().__init__()
        products.copies_wanted()  # a mistaken SPACY_ELMO_WEIGHT_COPIES is named now
        self.config = config
        self.lexicon = _checked_lexicon(config, lexicon)
        self.stateful = stateful
        self.token_cache = TokenVectorCache(token_cache_size)
        self.precision: PrecisionChoice = "fp32"
        self.precision_plan = PrecisionPlan({})
        self.token_encoder = CharCNNTokenEncoder(config)
        self.lstm = LSTMStack(
            len(DIRECTION_NAMES),
            config.n_layers,
            config.projection_dim,
            config.lstm_dim,
            config.cell_clip,
            config.proj_clip,
            config.use_skip_connections,
        )
        self.register_state_dict_post_hook(_split_directions)
        self.register_load_state_dict_pre_hook(_join_directions)
        bos_ids, eos_ids = _boundary_ids(config)
        self.register_buffer("bos_ids", torch.from_numpy(bos_ids), persistent=False)
        self.register_buffer("eos_ids", torch.from_numpy(eos_ids), persistent=False)
        self._states: tuple[torch.Tensor, torch.Tensor] | None = None
        self.reset_token_encoder_parameters()

    # -- construction and files ---------------------------------------------------------

    @classmethod
    def from_allennlp(
        cls, options_file: str | Path, weight_file: str | Path, *, stateful: bool = False
    ) -> BiLM:
        """Load AllenNLP/bilm-tf `options.json` + HDF5 weights."""
        bilm = cls(BiLMConfig.from_options_file(options_file), stateful=stateful)
        bilm.load_state_dict(load_allennlp_weights(bilm.config, weight_file))
        return bilm

    def to_allennlp(self, options_file: str | Path, weight_file: str | Path) -> None:
        """Write `options.json` + HDF5 weights that AllenNLP's `Elmo` and bilm-tf load (byte models)."""
        if self.config.uses_lexicon:
            raise ConfigError(
                "This biLM reads a character lexicon (ELMoForManyLangs), which AllenNLP's options "
                "and HDF5 layout cannot hold: keep it as our model directory (BiLM.save)."
            )
        self.config.to_options_file(options_file)
        save_allennlp_weights(self.state_dict(), self.config, weight_file)

    @classmethod
    def from_elmoformanylangs(cls, model_dir: str | Path, *, stateful: bool = False) -> BiLM:
        """Load an ELMoForManyLangs (HIT-SCIR) model directory: `config.json`, `char.dic`,
        `word.dic`, `token_embedder.pkl`, `encoder.pkl` (read without unpickling objects)."""
        config, state_dict, lexicon = read_elmoformanylangs(model_dir)
        bilm = cls(config, lexicon=lexicon, stateful=stateful)
        bilm.load_state_dict(state_dict)
        return bilm

    @classmethod
    def state_dict_shapes(cls, config: BiLMConfig) -> StateDictShapes:
        """The shapes of a `BiLM(config)`'s state dict, one tensor per LSTM direction as files hold
        (built on the meta device: nothing allocated, no random initialisation)."""
        return state_dict_shapes(lambda: cls(config))

    @classmethod
    def load(cls, path: str | Path, *, stateful: bool = False) -> BiLM:
        """Load our model directory (`config.json` + `model.safetensors`, + `lexicon.json`)."""
        config, state_dict = load_model_dir(path, cls.state_dict_shapes)
        lexicon = read_lexicon(path) if config.uses_lexicon else None
        bilm = cls(config, lexicon=lexicon, stateful=stateful)
        bilm.load_state_dict(state_dict)
        return bilm

    def save(self, path: str | Path) -> None:
        """Write our model directory (`config.json` + `model.safetensors`, + `lexicon.json` for a
        lexicon model), each file atomically."""
        save_model_dir(path, self.config, self.state_dict(), self.lexicon)

    def reset_token_encoder_parameters(self) -> None:
        """bilm-tf's training init of the token encoder; LSTMs init themselves."""
        encoder = self.token_encoder
        if encoder.char_embedding.is_meta:  # built for its shapes only: random init on the meta
            return  # device would import torch._dynamo, 2 s of every process's first load
        n_filters = self.config.n_filters
        nn.init.uniform_(encoder.char_embedding, -1.0, 1.0)
        for (width, _), convolution in zip(self.config.filters, encoder.convolutions):
            if self.config.activation == "relu":
                nn.init.uniform_(convolution.weight, -0.05, 0.05)
            else:
                std = math.sqrt(1.0 / (width * self.config.char_embedding_dim))
                nn.init.normal_(convolution.weight, std=std)
            nn.init.zeros_(convolution.bias)
        for highway in encoder.highways:
            nn.init.normal_(highway.linear.weight, std=math.sqrt(1.0 / n_filters))
            nn.init.zeros_(highway.linear.bias[:n_filters])
            nn.init.constant_(highway.linear.bias[n_filters:], -2.0)
        if encoder.word_embedding is not None:
            nn.init.uniform_(encoder.word_embedding, -0.25, 0.25)
        nn.init.normal_(encoder.projection.weight, std=math.sqrt(1.0 / n_filters))
        nn.init.zeros_(encoder.projection.bias)

    # -- state ------------------------------------------------------------------------------

    def set_precision(self, precision: str | PrecisionPlan) -> BiLM:
        """Choose how the matrix products run: "fp32" (exact, the default), "bf16", "int8", or
        "auto", or a `PrecisionPlan` (another process's "auto" plan, run as it is).

        "auto" on the CPU times each product in each mode on this machine (a few seconds for the
        original model, once: the times are cached) and runs each in the fastest mode that beats
        float32 beyond noise, else float32 (`auto_precision.py`); on a GPU it is bf16 where the
        GPU supports it. `precision_plan` holds the mode of every product.

        The reduced modes are for inference only (no gradients flow through them). The float32
        weights stay in place, so `save` and `to_allennlp` still write them, and training or
        loading new weights is seen by the reduced copies. Their speed and their deviation from
        the exact outputs are measured in docs/speed.md. Returns self.
        """
        device = self.bos_ids.device
        sites = self.product_sites()
        if isinstance(precision, PrecisionPlan):  # a plan measured elsewhere (a run's other workers)
            choice, plan = "auto", check_plan(precision, sites)
        elif (choice := check_precision(precision, device)) != "auto":
            plan = uniform_plan(choice, sites)
        elif device.type == "cpu":
            plan = measured_plan(sites, cache_dir=default_cache_dir())
        else:
            plan = uniform_plan(gpu_auto_precision(device), sites)
        for prefix, module in self._reducible_modules().items():
            module.set_product_modes(
                {name: plan.modes[f"{prefix}.{name}"] for name in module.product_sites()}
            )
        products.WEIGHT_COPIES.forget(self.parameters())
        self.precision, self.precision_plan = choice, plan
        self.clear_token_cache()
        return self

    def product_sites(self) -> dict[str, ProductSite]:
        """Every matrix product a precision applies to, by name (`lstm.layers.0.recurrent`)."""
        return {
            f"{prefix}.{name}": site
            for prefix, module in self._reducible_modules().items()
            for name, site in module.product_sites().items()
        }

    def _reducible_modules(self) -> dict[str, ReducibleProducts]:
        return {
            name: module for name, module in self.named_modules() if isinstance(module, ReducibleProducts)
        }

    def clear_token_cache(self) -> None:
        """Forget the cached token-encoder outputs (they are also dropped when weights change)."""
        self.token_cache.clear()

    def reset_states(self) -> None:
        """Forget the carried LSTM states (stateful mode): the next call starts from zeros."""
        self._states = None

    def _initial_states(self, batch_size: int, order: torch.Tensor) -> list[LSTMState]:
        """Per layer (h (2, B, P), c (2, B, H)) for the length-sorted batch."""
        if not self.stateful or self._states is None:
            return self.lstm.zero_states(batch_size)
        hidden, cell = (self._pad_rows(stored, batch_size)[:, :, order] for stored in self._states)
        return list(zip(hidden, cell))

    @staticmethod
    def _pad_rows(stored: torch.Tensor, batch_size: int) -> torch.Tensor:
        """stored (L, 2, B_stored, D) -> (L, 2, max(B_stored, B), D), new rows zero."""
        missing = batch_size - stored.shape[2]
        if missing <= 0:
            return stored
        return torch.cat([stored, stored.new_zeros(*stored.shape[:2], missing, stored.shape[3])], 2)

    def _store_states(self, final_states: list[LSTMState], order: torch.Tensor) -> None:
        """Keep the final states per original batch row; stored rows past this batch keep theirs."""
        batch_size = order.shape[0]
        new_states = []
        for part in range(2):  # 0 = h, 1 = c
            sorted_rows = torch.stack([state[part] for state in final_states]).detach()  # (L, 2, B, D)
            rows = torch.empty_like(sorted_rows)
            rows[:, :, order] = sorted_rows
            if self._states is not None:
                stored = self._pad_rows(self._states[part], batch_size).clone()
                stored[:, :, :batch_size] = rows
                rows = stored
            new_states.append(rows)
        self._states = (new_states[0], new_states[1])

    # -- computation ------------------------------------------------------------------------

    def sentences_to_ids(self, sentences: Sequence[Sequence[str]]) -> CharIds:
        """The ids `forward` reads: char ids (B, T, C) from UTF-8 bytes (`batch_to_ids`) or from the
        lexicon, and word ids (B, T) for a model with a word embedding (else None)."""
        if not self.config.uses_lexicon:
            return batch_to_ids(sentences, self.config.max_characters_per_token), None
        if self.lexicon is None:
            raise InputError(
                "This biLM reads a character lexicon but was built without one: load it with "
                "BiLM.load(model_dir) or BiLM.from_elmoformanylangs(dir), which read the lexicon."
            )
        return self.lexicon.batch_to_ids(sentences)

    def forward(
        self,
        char_ids: torch.Tensor,
        *,
        word_ids: torch.Tensor | None = None,
        keep_sentence_boundaries: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Contextual layers of every token.

        Args:
            char_ids: (B, T, C) int64 from `sentences_to_ids` (or `batch_to_ids` for a byte model),
                0 rows = no token; no `<S>`/`</S>`.
            word_ids: (B, T) int64 from `sentences_to_ids`, 0 = no token: only (and always) for a
                model with a word embedding.
            keep_sentence_boundaries: also return the `<S>` (position 0) and `</S>` (right after
                each row's last token) positions, as AllenNLP's `_ElmoBiLm` does; T becomes T + 2.
        Returns:
            layers: (L + 1, B, T, 2P) float32. Layer 0 is the token layer `[x; x]`, layer j the
                j-th LSTM layer `[forward; backward]`; positions past a sentence's end are 0.
            mask: (B, T) bool, True where a token is.
        """
        if self.precision_plan.reduces() and torch.is_grad_enabled():
            raise InputError(
                f"This BiLM runs at precision {self.precision!r}, which is for inference only: call it "
                'under torch.no_grad(), or set_precision("fp32") to train it.'
            )
        lengths = self._validated_lengths(char_ids)
        on_cpu = char_ids.device.type == "cpu"  # the thread policy times CPU batches only
        with THREAD_POLICY.batch(char_ids.shape[0] * (char_ids.shape[1] + 2)) if on_cpu else nullcontext():
            return self._layers(char_ids, lengths, word_ids, keep_sentence_boundaries)

    def _layers(
        self,
        char_ids: torch.Tensor,
        lengths: torch.Tensor,
        word_ids: torch.Tensor | None,
        keep_sentence_boundaries: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What `forward` returns, once its checks passed: `lengths` (B,) tokens per row."""
        batch_size, max_length, _ = char_ids.shape
        device = char_ids.device
        with_boundaries = self._add_boundaries(char_ids, lengths)  # (B, T + 2, C)
        words = self._word_ids_with_boundaries(word_ids, lengths, max_length)  # (B, T + 2) or None
        order = torch.argsort(lengths, descending=True, stable=True)
        sorted_lengths = lengths[order] + 2
        batch_sizes = (
            (sorted_lengths.unsqueeze(0) > torch.arange(max_length + 2, device=device).unsqueeze(1))
            .sum(1)
            .tolist()
        )
        token_vectors = self.token_encoder.encode_types(
            with_boundaries[order], self.token_cache, None if words is None else words[order]
        )  # (B, T + 2, P)
        reversal = _reversal_index(sorted_lengths, max_length + 2)
        directions = torch.stack([token_vectors, _reverse_rows(token_vectors, reversal)])  # (2, B, T + 2, P)
        outputs, final_states = self.lstm(directions, batch_sizes, self._initial_states(batch_size, order))
        if self.stateful:
            self._store_states(final_states, order)
        sorted_layers = [torch.cat([token_vectors, token_vectors], dim=-1)] + [
            torch.cat([forward, _reverse_rows(backward, reversal)], dim=-1) for forward, backward in outputs
        ]
        unsorted = torch.empty_like(order)
        unsorted[order] = torch.arange(batch_size, device=device)
        layers = torch.stack(sorted_layers)[:, unsorted]  # (L + 1, B, T + 2, 2P)
        if keep_sentence_boundaries:
            lengths, max_length = lengths + 2, max_length + 2
        else:
            layers = layers[:, :, 1 : max_length + 1]
        mask = torch.arange(max_length, device=device).unsqueeze(0) < lengths.unsqueeze(1)
        return layers * mask.unsqueeze(-1), mask

    def embed_sentences(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int = 64,
        max_batch_tokens: int | None = None,
    ) -> list[np.ndarray]:
        """Embed tokenised sentences without autograd.

        Returns one float32 array (L + 1, n_tokens, 2P) per sentence, in input order; an empty
        sentence gives (L + 1, 0, 2P). Stateless models batch sentences of similar length together
        (at most `batch_size` sentences and, if given, `max_batch_tokens` padded positions per
        batch, which bounds memory); stateful ones keep the given order, since their outputs
        depend on it.
        """
        sentences = validate_sentences(sentences)
        if batch_size < 1:
            raise InputError(f"batch_size is {batch_size}: it must be at least 1.")
        padded_lengths = [len(sentence) + 2 for sentence in sentences]  # with `<S>` and `</S>`
        order: BatchOrder = "as_given" if self.stateful else "longest_first"
        embedded: list[np.ndarray | None] = [None] * len(sentences)
        with torch.no_grad():
            for batch in budget_batches(padded_lengths, max_batch_tokens, max_rows=batch_size, order=order):
                char_ids, word_ids = self.sentences_to_ids([sentences[index] for index in batch])
                device = self.bos_ids.device
                layers, _ = self(
                    char_ids.to(device), word_ids=None if word_ids is None else word_ids.to(device)
                )
                layers = layers.float().cpu()
                for row, index in enumerate(batch):
                    embedded[index] = layers[:, row, : len(sentences[index])].numpy().copy()
        return embedded  # type: ignore[return-value]

    def _validated_lengths(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Check the char id tensor; return each row's number of tokens (B,)."""
        if not isinstance(char_ids, torch.Tensor):
            raise InputError(
                f"BiLM expects a LongTensor of char ids (B, T, C), got {type(char_ids).__name__}. "
                "Use batch_to_ids(sentences) or bilm.embed_sentences(sentences)."
            )
        n_chars = self.config.max_characters_per_token
        if char_ids.dim() != 3 or char_ids.shape[-1] != n_chars:
            raise InputError(
                f"Char ids must have shape (batch, tokens, {n_chars}); got {tuple(char_ids.shape)}."
            )
        if char_ids.dtype.is_floating_point or char_ids.dtype == torch.bool:
            raise InputError(f"Char ids must be integers; got dtype {char_ids.dtype}.")
        n_char_ids = self.config.n_char_ids
        if char_ids.numel() and (char_ids.min() < 0 or char_ids.max() >= n_char_ids):
            raise InputError(
                f"Char ids must lie in 0..{n_char_ids - 1}; found values in "
                f"{int(char_ids.min())}..{int(char_ids.max())}. Build them with bilm.sentences_to_ids."
            )
        token_mask = (char_ids > 0).any(dim=-1)
        lengths = token_mask.sum(dim=1)
        positions = torch.arange(char_ids.shape[1], device=char_ids.device)
        if not torch.equal(token_mask, positions.unsqueeze(0) < lengths.unsqueeze(1)):
            row = int((token_mask != (positions < lengths.unsqueeze(1))).any(dim=1).nonzero()[0])
            raise InputError(
                f"Row {row} of the char ids has an all-zero (padding) token before a real token: "
                "padding must come after each sentence's last token."
            )
        return lengths

    def _word_ids_with_boundaries(
        self, word_ids: torch.Tensor | None, lengths: torch.Tensor, max_length: int
    ) -> torch.Tensor | None:
        """Check word ids (B, T) against the char ids' lengths (B,) and T; (B, T + 2) with the sentence
        start and end words added, as `_add_boundaries` adds their char rows. None without a word
        embedding."""
        if not self.config.word_dim:
            if word_ids is not None:
                raise InputError("This biLM has no word embedding: call it without word_ids.")
            return None
        if (
            not isinstance(word_ids, torch.Tensor)
            or word_ids.dtype.is_floating_point
            or word_ids.dtype == torch.bool
        ):
            raise InputError(
                "This biLM has a word embedding: pass word_ids, an integer tensor (B, T), with the "
                "char ids, as bilm.sentences_to_ids(sentences) gives them."
            )
        batch_size = lengths.shape[0]
        if tuple(word_ids.shape) != (batch_size, max_length):
            raise InputError(
                f"word_ids must have the char ids' first two axes, {(batch_size, max_length)}; got "
                f"{tuple(word_ids.shape)}."
            )
        positions = torch.arange(max_length + 2, device=word_ids.device).unsqueeze(0)
        with_boundaries = word_ids.new_zeros(batch_size, max_length + 2)
        with_boundaries[:, 1:-1] = word_ids
        is_token = (positions >= 1) & (positions <= lengths.unsqueeze(1))  # (B, T + 2)
        token_words = with_boundaries[is_token]
        if token_words.numel() and (token_words.min() < 1 or token_words.max() > self.config.n_words):
            raise InputError(
                f"Word ids of tokens must lie in 1..{self.config.n_words}; found values in "
                f"{int(token_words.min())}..{int(token_words.max())}. Build them with bilm.sentences_to_ids."
            )
        with_boundaries[~is_token] = 0
        with_boundaries[:, 0] = SENTENCE_START_WORD_ID
        with_boundaries[torch.arange(batch_size), lengths + 1] = SENTENCE_END_WORD_ID
        return with_boundaries

    def _add_boundaries(self, char_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (B, T + 2, C) with `<S>` at 0 and `</S>` right after each row's last token."""
        batch_size, max_length, n_chars = char_ids.shape
        with_boundaries = char_ids.new_zeros(batch_size, max_length + 2, n_chars)
        with_boundaries[:, 1 : max_length + 1] = char_ids
        with_boundaries[:, 0] = self.bos_ids
        with_boundaries[torch.arange(batch_size), lengths + 1] = self.eos_ids
        return with_boundaries


def _checked_lexicon(config: BiLMConfig, lexicon: Lexicon | None) -> Lexicon | None:
    """The lexicon, checked against the config: only lexicon models have one, and it must fit."""
    if lexicon is None:
        return None
    if not config.uses_lexicon:
        raise ConfigError("A lexicon was given for a byte model: its char ids are UTF-8 bytes.")
    if lexicon.max_characters_per_token != config.max_characters_per_token:
        raise ConfigError(
            f"The lexicon cuts tokens to {lexicon.max_characters_per_token} char ids, the config to "
            f"{config.max_characters_per_token}: they do not belong together."
        )
    if lexicon.n_character_rows > config.char_embedding_rows:
        raise ConfigError(
            f"The lexicon uses character row {lexicon.n_character_rows - 1}, but the model has "
            f"{config.char_embedding_rows} rows: they do not belong together."
        )
    if (lexicon.words is None) != (config.word_dim == 0) or lexicon.n_word_rows > config.n_words:
        raise ConfigError(
            f"The lexicon has {lexicon.n_word_rows} word rows, the model's word embedding "
            f"{config.n_words}: they do not belong together."
        )
    return lexicon


def _boundary_ids(config: BiLMConfig) -> tuple[np.ndarray, np.ndarray]:
    """Char ids (C,) of the sentence start and end tokens, for bytes or for a lexicon."""
    max_chars = config.max_characters_per_token
    if config.uses_lexicon:
        return boundary_token_ids(SENTENCE_START_ROW, max_chars), boundary_token_ids(
            SENTENCE_END_ROW, max_chars
        )
    return bos_token_ids(max_chars), eos_token_ids(max_chars)


def _reversal_index(lengths: torch.Tensor, max_length: int) -> torch.Tensor:
    """(B, T) time index that reverses each row within its own length and leaves padding."""
    positions = torch.arange(max_length, device=lengths.device).unsqueeze(0)
    lengths = lengths.unsqueeze(1)
    return torch.where(positions < lengths, lengths - 1 - positions, positions)


def _reverse_rows(sequences: torch.Tensor, reversal: torch.Tensor) -> torch.Tensor:
    """sequences (B, T, D) -> each row reversed within its own length (an involution)."""
    index = reversal.unsqueeze(-1).expand_as(sequences)
    return torch.gather(sequences, 1, index)


def _split_directions(module: BiLM, state_dict: dict[str, Any], prefix: str, local_metadata: Any) -> None:
    """State-dict hook: `lstm.layers.j.w` (2, ...) -> `forward_lstm.layers.j.w` and
    `backward_lstm.layers.j.w`, so files keep one tensor per direction whatever the run layout."""
    stacked_prefix = f"{prefix}lstm."
    for key in [key for key in state_dict if key.startswith(stacked_prefix)]:
        stacked = state_dict.pop(key)
        for direction, name in enumerate(DIRECTION_NAMES):
            state_dict[f"{prefix}{name}.{key[len(stacked_prefix) :]}"] = stacked[direction]


def _join_directions(module: BiLM, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
    """Load-state-dict pre-hook, the inverse of `_split_directions`: a parameter whose every
    direction is present is stacked; anything else is left for `load_state_dict` to report."""
    forward_prefix = f"{prefix}{DIRECTION_NAMES[0]}."
    for key in [key for key in state_dict if key.startswith(forward_prefix)]:
        suffix = key[len(forward_prefix) :]
        direction_keys = [f"{prefix}{name}.{suffix}" for name in DIRECTION_NAMES]
        if all(direction_key in state_dict for direction_key in direction_keys):
            state_dict[f"{prefix}lstm.{suffix}"] = torch.stack(
                [state_dict.pop(direction_key) for direction_key in direction_keys]
            )


def check_plan(plan: PrecisionPlan, sites: dict[str, ProductSite]) -> PrecisionPlan:
    """A plan made elsewhere, checked to name this model's products in modes they have."""
    if set(plan.modes) != set(sites):
        differing = sorted(set(plan.modes) ^ set(sites))
        raise ConfigError(
            f"The precision plan names other products than this biLM has ({', '.join(differing[:3])}): "
            "it was made for a biLM of another shape. Measure it for this one (precision 'auto')."
        )
    for name, modes in plan.modes.items():
        for _, mode in modes:
            if mode != "fp32" and mode not in sites[name].modes:
                raise ConfigError(f"The precision plan runs {name} in {mode}, a mode it does not have.")
    return plan
