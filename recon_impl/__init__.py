"""recon_impl: the reconstruction loss stack in torch, for training code.

Where things are:

* ``config.py`` — ``ReconstructionLossConfig``, ``DisentanglementLossConfig``
* ``terms.py`` — the one table of the terms, parameters, diagnostics and total: the config
  fields, flags, output names and the stack's terms derive from it
* ``reconstruction.py`` — ``reconstruction_losses``: the terms, the diagnostics, the total
* ``stack.py``, ``statistics.py`` — the one formulation: a statistics stage, a reduction
  stage and the analytic gradient that makes them one autograd node (eager,
  ``torch.compile``, ``torch.func``)
* ``total_loss.py`` — ``compute_total_loss``: reconstruction plus the auxiliary terms
  (``TOTAL_LOSS_NAMES``, ``AUXILIARY_TERM_NAMES``)
* ``training_step.py`` — ``TrainingStep``: one optimizer step over micro-batches and ranks
  through ``compute_total_loss``, exactly, with one logged dict of floats
* ``logits.py`` — ``token_nll_from_logits`` (with the causal-LM shift, float32 losses)
* ``trainer_flags.py`` — the trainer's command-line flags
* ``validation.py`` — the input checks (MATH.md, "Errors")
* ``zfree_reference_scale.py`` — ``estimate_zfree_reference_scale``: c measured from data
* ``batch_decomposition.py`` — kept-example weights for gradient accumulation and data
  parallelism
* ``distributed.py`` — the torch.distributed group and device the two above reduce over
"""

from recon_impl.batch_decomposition import (
    kept_example_count,
    shard_weights,
    weighted_shard_losses,
)
from recon_impl.config import DisentanglementLossConfig, ReconstructionLossConfig
from recon_impl.logits import token_nll_from_logits
from recon_impl.reconstruction import (
    DIAGNOSTIC_NAMES,
    RECONSTRUCTION_LOSS_NAMES,
    RECONSTRUCTION_TERM_NAMES,
    ReconstructionLosses,
    reconstruction_losses,
)
from recon_impl.total_loss import AUXILIARY_TERM_NAMES, TOTAL_LOSS_NAMES, compute_total_loss
from recon_impl.trainer_flags import (
    add_reconstruction_loss_arguments,
    reconstruction_loss_config_from_args,
)
from recon_impl.training_step import TrainingStep
from recon_impl.zfree_reference_scale import estimate_zfree_reference_scale

__all__ = [
    "AUXILIARY_TERM_NAMES",
    "DIAGNOSTIC_NAMES",
    "RECONSTRUCTION_LOSS_NAMES",
    "RECONSTRUCTION_TERM_NAMES",
    "TOTAL_LOSS_NAMES",
    "DisentanglementLossConfig",
    "ReconstructionLossConfig",
    "ReconstructionLosses",
    "TrainingStep",
    "add_reconstruction_loss_arguments",
    "compute_total_loss",
    "estimate_zfree_reference_scale",
    "kept_example_count",
    "reconstruction_loss_config_from_args",
    "reconstruction_losses",
    "shard_weights",
    "token_nll_from_logits",
    "weighted_shard_losses",
]
