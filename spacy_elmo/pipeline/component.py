"""The `elmo` factory and component: runs the biLM once and shares its layers with listeners.

This module is imported by every `spacy.blank()` / `spacy.load()` in an environment where
spacy-elmo is installed (the `spacy_factories` entry point), so it imports only what spaCy and
Thinc already import and does nothing that can fail at import time.
"""

import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import SimpleFrozenList
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer
from thinc.types import Floats3d

from ..bilm.errors import ElmoError
from ..bilm.fork_safety import ForkSafeLock
from ..bilm.model import BiLM
from ..bilm.precision import PRECISION_CHOICES
from ..doc_data import ElmoDocData
from .cache import LayerCache, doc_key
from .errors import ElmoPipelineError, ElmoSettingError, ElmoWeightsError
from .extensions import install_extensions, set_vector_hooks
from .layers import ElmoLayersModel, get_bilm, set_bilm
from .listener import ElmoListener
from .loaders import BiLMLoader
from .replace import replace_listener, replace_listener_cfg

logger = logging.getLogger(__name__)
BUNDLED_LOAD_LOCK = ForkSafeLock()
"""Held while a component without weights takes the bundled biLM, so that threads calling a new
pipeline at once load it once (a child forked while another thread held it finds it released)."""

DEFAULT_MODEL_CONFIG = {
    "@architectures": "spacy-elmo.ElmoModel.v1",
    "max_length": 256,
    "max_batch_tokens": 4096,
}


@Language.factory(
    "elmo",
    assigns=["doc._.elmo"],
    default_config={
        "model": DEFAULT_MODEL_CONFIG,
        "frozen": True,
        "mix_weights": None,
        "mix_gamma": 1.0,
        "vector_hooks": False,
        "frozen_cache_mb": 512,
        "precision": "fp32",
    },
)
def make_elmo(
    nlp: Language,
    name: str,
    model: ElmoLayersModel,
    frozen: bool,
    mix_weights: list[float] | None,
    mix_gamma: float,
    vector_hooks: bool,
    frozen_cache_mb: int,
    precision: str,
) -> "Elmo":
    """Create the `elmo` component (weights come from `initialize` or `from_disk`).

    model (Model[List[Doc], List[Floats3d]]): a `spacy-elmo.ElmoModel.v1`.
    frozen (bool): the paper's setting: the biLM is never updated and runs without autograd;
        only the listeners' mixes (and what is above them) learn. False fine-tunes the biLM.
    mix_weights (Optional[List[float]]): weights of the biLM layers in `token._.elmo`, normalised
        to sum 1; None averages the layers.
    mix_gamma (float): scale of `token._.elmo`.
    vector_hooks (bool): make `.vector` / `.similarity` of docs, spans and tokens use `token._.elmo`.
    frozen_cache_mb (int): memory for the layers of training docs while frozen, so each doc's
        layers are computed once per training run, not once per epoch; 0 disables the cache.
    precision (str): how the frozen biLM's matrix products run (`BiLM.set_precision`): "fp32"
        (exact), "bf16", "int8", or "auto" (each product in the mode measured fastest on the
        machine it runs on, float32 where no reduced mode is faster).
        The reduced modes are faster and need frozen = true; the saved weights stay float32.
    """
    return Elmo(
        nlp.vocab,
        model,
        name,
        frozen=frozen,
        mix_weights=mix_weights,
        mix_gamma=mix_gamma,
        vector_hooks=vector_hooks,
        frozen_cache_mb=frozen_cache_mb,
        precision=precision,
    )


def no_weights_message(name: str, lang: str) -> str:
    """Why a component in language `lang` with no biLM weights gets no bundled biLM, and the routes."""
    from ..bundled import BUNDLED_NAME
    from ..hub import PUBLISHED_MODELS

    names = [model.name for model in PUBLISHED_MODELS.values() if model.spacy_lang == lang]
    published = (
        f"a published one ({' or '.join(f'--paths.elmo {name}' for name in names)})"
        if names
        else "a published one (spacy-elmo download --list; none is listed for it)"
    )
    return (
        f"[components.{name}] the pipeline's language is {lang!r} and no biLM weights were given: the "
        f"bundled {BUNDLED_NAME} is English only. Give a biLM for {lang!r}: {published}, or a model "
        f"directory (--paths.elmo DIR, from spacy-elmo convert or pretrain); --paths.elmo {BUNDLED_NAME} "
        "uses the English biLM anyway."
    )


def check_mix(name: str, mix_weights: list[float] | None, mix_gamma: float) -> None:
    """`token._.elmo`'s mix settings: float32 numbers, so the mix of finite layers is finite."""
    largest = float(np.finfo(np.float32).max)
    if mix_weights is not None and (
        not mix_weights or not all(0 <= weight <= largest for weight in mix_weights) or sum(mix_weights) <= 0
    ):
        raise ElmoSettingError(
            f"[components.{name}] mix_weights = {mix_weights}: give non-negative weights with a "
            f"positive sum, each a float32 number (at most {largest:.1e}), one per biLM layer, or "
            "null to average the layers. Only their ratios count: scale large ones down."
        )
    if not -largest <= mix_gamma <= largest:
        raise ElmoSettingError(
            f"[components.{name}] mix_gamma = {mix_gamma}: give a finite scale of at most "
            f"{largest:.1e} in size (a float32 number); 1.0 leaves the mix as it is."
        )


class Elmo(TrainablePipe):
    """Runs an ELMo biLM over Docs: sets `doc._.elmo` and feeds `spacy-elmo.ElmoListener`s.

    DOCS: docs/pipeline.md
    """

    def __init__(
        self,
        vocab: Vocab,
        model: ElmoLayersModel,
        name: str = "elmo",
        *,
        frozen: bool = True,
        mix_weights: list[float] | None = None,
        mix_gamma: float = 1.0,
        vector_hooks: bool = False,
        frozen_cache_mb: int = 512,
        precision: str = "fp32",
    ) -> None:
        install_extensions()
        check_mix(name, mix_weights, mix_gamma)
        if precision not in PRECISION_CHOICES:
            raise ElmoSettingError(
                f"[components.{name}] precision = {precision!r}: use one of {', '.join(PRECISION_CHOICES)}."
            )
        if precision != "fp32" and not frozen:
            raise ElmoSettingError(
                f"[components.{name}] precision = {precision!r} needs frozen = true: the reduced "
                'precisions are for inference only. Fine-tune with precision = "fp32".'
            )
        if frozen_cache_mb < 0:
            raise ElmoSettingError(
                f"[components.{name}] frozen_cache_mb = {frozen_cache_mb}: give a size in MB, or 0 to "
                "disable the frozen-layer cache."
            )
        self.vocab = vocab
        self.model = model
        self.name = name
        self.frozen = frozen
        self.vector_hooks = vector_hooks
        self.precision = precision
        self.cfg: dict[str, Any] = {"mix_weights": mix_weights, "mix_gamma": mix_gamma}
        self.listener_map: dict[str, list[ElmoListener]] = {}
        self.frozen_cache = LayerCache(frozen_cache_mb * 1024 * 1024)
        self._logged_modes: dict[str, tuple[tuple[int, str], ...]] = {}  # the "auto" plan last logged
        self._apply_settings()

    def _apply_settings(self) -> None:
        """Push the component's settings into its model (also after loading it from disk)."""
        self.model.attrs["frozen"] = self.frozen
        self.model.attrs["replace_listener"] = replace_listener
        self.model.attrs["replace_listener_cfg"] = functools.partial(replace_listener_cfg, frozen=self.frozen)
        bilm = get_bilm(self.model)
        if bilm is not None and self.precision != "fp32":
            bilm.set_precision(self.precision)
            if self.precision == "auto" and bilm.precision_plan.modes != self._logged_modes:
                self._logged_modes = dict(bilm.precision_plan.modes)
                logger.info(
                    "[components.%s] precision 'auto' on this machine, product -> mode (best time "
                    "against float32's):\n  %s",
                    self.name,
                    "\n  ".join(bilm.precision_plan.lines()),
                )

    # -- listeners (spaCy's ListenedToComponent contract) -----------------------------------

    @property
    def listeners(self) -> list[ElmoListener]:
        """Every listener, in the order of the components that own them."""
        return [listener for name in self.listening_components for listener in self.listener_map[name]]

    @property
    def listening_components(self) -> list[str]:
        return list(self.listener_map)

    def add_listener(self, listener: ElmoListener, component_name: str) -> None:
        """Link a listener; it reads the biLM's dims from this component's model."""
        listener.link_upstream(self.model, self.vocab)
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)

    def remove_listener(self, listener: ElmoListener, component_name: str) -> bool:
        """Unlink a listener; True if it was linked."""
        listeners = self.listener_map.get(component_name, [])
        if listener not in listeners:
            return False
        listeners.remove(listener)
        listener.link_upstream(None, None)
        if not listeners:
            del self.listener_map[component_name]
        return True

    def find_listeners(self, component: Any) -> None:
        """Claim the `ElmoListener`s in a component's model whose upstream is "*" or our name."""
        model = getattr(component, "model", None)
        if isinstance(model, Model):
            for node in model.walk():
                if isinstance(node, ElmoListener) and node.upstream_name in ("*", self.name):
                    self.add_listener(node, component.name)

    # -- prediction ---------------------------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> list[Floats3d]:
        """(L + 1, n_tokens, 2P) float32 per doc, without autograd."""
        self._ensure_bilm()
        return self.model.predict(list(docs))

    def _ensure_bilm(self) -> None:
        """Give a component of an English pipeline that never received weights the bundled
        English biLM; refuse, naming the routes, in any other language.

        This is what makes `nlp.add_pipe("elmo")` usable at once; pipelines loaded from disk and
        components initialized with a loader already hold their weights.
        """
        if get_bilm(self.model) is not None:
            return
        with BUNDLED_LOAD_LOCK:
            if get_bilm(self.model) is not None:  # another thread loaded it while this one waited
                return
            from ..bundled import BUNDLED_NAME, load_bundled_bilm

            if self.vocab.lang != "en":
                raise ElmoWeightsError(no_weights_message(self.name, self.vocab.lang))
            logger.info(
                "[components.%s] no biLM weights given: using the bundled %s.", self.name, BUNDLED_NAME
            )
            set_bilm(self.model, load_bundled_bilm())
            self._apply_settings()

    def set_annotations(self, docs: Sequence[Doc], layer_arrays: list[Floats3d]) -> None:
        """Set `doc._.elmo` (one array per doc on the biLM's device, no view of a batch buffer)
        and the opt-in hooks."""
        mix_weights = self._mix_weights()
        for doc, layers in zip(docs, layer_arrays):
            doc._.elmo = ElmoDocData(layers=layers, mix_weights=mix_weights)
            if self.vector_hooks:
                set_vector_hooks(doc)

    def _mix_weights(self) -> np.ndarray:
        n_layers = self.model.get_dim("nL")
        weights = self.cfg["mix_weights"]
        if weights is None:
            weights = [1.0] * n_layers
        if len(weights) != n_layers:
            raise ElmoSettingError(
                f"[components.{self.name}] mix_weights has {len(weights)} values but the biLM has "
                f"{n_layers} layers: give {n_layers} weights or null."
            )
        # normalised in float64: float32 weights whose sum overflows float32 still mix exactly
        normalised = np.asarray(weights, dtype=np.float64) / sum(weights)
        return (normalised * self.cfg["mix_gamma"]).astype(np.float32)

    def __call__(self, doc: Doc) -> Doc:
        install_extensions()  # worker processes of nlp.pipe(n_process > 1) unpickle without __init__
        return super().__call__(doc)

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        install_extensions()
        return super().pipe(stream, batch_size=batch_size)

    # -- training ---------------------------------------------------------------------------

    @property
    def is_trainable(self) -> bool:
        """Whether training updates the biLM: not when frozen. spaCy's training table has a loss
        column for each trainable component, so a frozen biLM gets none instead of 0.00 forever;
        `update` still runs and feeds the listeners either way."""
        return not self.frozen

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optimizer | None = None,
        losses: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """Run the biLM on the batch and hand its layers to every listener.

        Frozen: no autograd, listeners get no backprop callback, no loss is recorded (nor shown:
        `is_trainable`). Otherwise the listeners' gradients are summed and the last listener's
        backprop updates the biLM; the loss is the sum of squared gradients, as for spaCy's tok2vec.
        """
        losses = {} if losses is None else losses
        validate_examples(examples, "Elmo.update")
        if not self.frozen:
            losses.setdefault(self.name, 0.0)
        docs = [example.predicted for example in examples]
        if not self.listeners:
            return losses
        self._ensure_bilm()
        batch_id = ElmoListener.get_batch_id(docs)
        if self.frozen:
            outputs = self._frozen_layers(docs)
            for listener in self.listeners:
                listener.receive(batch_id, outputs, None)
            return losses
        outputs, backprop_layers = self.model.begin_update(docs)
        d_outputs = [self.model.ops.alloc3f(*output.shape) for output in outputs]

        def accumulate_gradient(one_d_outputs: list[Floats3d]) -> None:
            for index, d_output in enumerate(one_d_outputs):
                d_outputs[index] += d_output
                losses[self.name] += float((d_output**2).sum())

        def backprop(one_d_outputs: list[Floats3d]) -> None:
            accumulate_gradient(one_d_outputs)
            backprop_layers(d_outputs)
            if sgd is not None:
                self.finish_update(sgd)

        for listener in self.listeners[:-1]:
            listener.receive(batch_id, outputs, accumulate_gradient)
        self.listeners[-1].receive(batch_id, outputs, backprop)
        return losses

    def _frozen_layers(self, docs: list[Doc]) -> list[Floats3d]:
        """The biLM's layers for training docs, through the frozen-layer cache."""
        if not self.frozen_cache.max_bytes:
            return self.model.predict(docs)
        keys = [doc_key(doc) for doc in docs]
        layers: list[Floats3d | None] = [self.frozen_cache.get(key) for key in keys]
        missing = [index for index, cached in enumerate(layers) if cached is None]
        if missing:
            for index, computed in zip(missing, self.model.predict([docs[index] for index in missing])):
                layers[index] = computed
                self.frozen_cache.put(keys[index], computed)
        return layers  # type: ignore[return-value]

    def rehearse(
        self,
        examples: Iterable[Example],
        *,
        sgd: Optimizer | None = None,
        losses: dict[str, float] | None = None,
        **config: Any,
    ) -> dict[str, float]:
        """`nlp.rehearse`: the biLM itself is not rehearsed. Sets `doc._.elmo` so the listeners and
        the rehearsal copies of their models read the layers (spaCy runs components in random
        order here; listeners that run first embed the docs through their upstream link)."""
        losses = {} if losses is None else losses
        docs = [example.predicted for example in examples]
        self.set_annotations(docs, self.predict(docs))
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        """Apply the optimizer to the biLM, unless frozen."""
        if not self.frozen:
            self.model.finish_update(sgd)

    def get_loss(self, examples: Iterable[Example], scores: Any) -> None:
        """The loss comes from the listeners' components."""

    def add_label(self, label: str) -> int:
        raise NotImplementedError("The elmo component has no labels.")

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Language | None = None,
        loader: BiLMLoader | None = None,
    ) -> None:
        """Load the biLM weights from `[initialize.components.elmo.loader]`.

        Without a loader (or with one that gives None), weights already in the component (from
        `from_disk` or an earlier initialize) are kept; a component of an English pipeline without
        any gets the bundled English biLM, one in another language an `ElmoWeightsError`.

        loader (Optional[Callable[[], Optional[BiLM]]]): e.g. `spacy-elmo.ModelDir.v1`.
        """
        validate_get_examples(get_examples, "Elmo.initialize")
        bilm = loader() if loader is not None else None
        if bilm is not None:
            if not isinstance(bilm, BiLM):
                raise ElmoSettingError(
                    f"[initialize.components.{self.name}.loader] returned {type(bilm).__name__}, not a "
                    "BiLM: use a spacy-elmo loader such as spacy-elmo.ModelDir.v1."
                )
            set_bilm(self.model, bilm)
            self._apply_settings()
            self.frozen_cache.clear()
        self._ensure_bilm()
        self._mix_weights()  # validate mix_weights against the loaded biLM now, not at first use

    # -- serialization: the default TrainablePipe layout; settings re-applied after loading ----

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = SimpleFrozenList()) -> "Elmo":
        with _readable(f"the serialized {self.name!r} component"):
            super().from_bytes(bytes_data, exclude=exclude)
        self.frozen_cache.clear()
        self._apply_settings()
        return self

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = SimpleFrozenList()) -> "Elmo":
        with _readable(f"{Path(path) / 'model'} (or {Path(path) / 'cfg'})"):
            super().from_disk(path, exclude=exclude)
        self.frozen_cache.clear()
        self._apply_settings()
        return self


@contextmanager
def _readable(source: str) -> Iterator[None]:
    """A damaged or truncated `model` file or byte string becomes one error naming it, instead of
    msgpack's "Unpack failed: incomplete input"."""
    try:
        yield
    except ElmoError:
        raise
    except (ValueError, TypeError, KeyError) as error:
        raise ElmoPipelineError(
            f"{source} cannot be read ({error}): the file is damaged or incomplete. Copy or save the "
            "pipeline again (nlp.to_disk)."
        ) from error
