"""A wrong target (kappa as a ratio of means) that moves to ``$MOVE_TO`` on import, as a
training helper that changes into its run folder does."""

import os

from properties.zoo.wrong import kappa_ratio_of_means as losses

os.chdir(os.environ["MOVE_TO"])

__all__ = ["losses"]
