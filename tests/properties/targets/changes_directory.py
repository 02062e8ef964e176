"""A wrong target (float64 results whatever the inputs) that moves to ``$MOVE_TO`` on
import, as a training helper that changes into its run folder does."""

import os

from properties.zoo.wrong import float64_outputs as losses

os.chdir(os.environ["MOVE_TO"])

__all__ = ["losses"]
