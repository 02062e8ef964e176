"""A correct target that starts a long-lived child process on import (a data loader's
worker, a metrics daemon), which keeps every file descriptor it inherited."""

import os
import subprocess

from properties.default_target import reconstruction_losses as losses

_child = subprocess.Popen(["sleep", os.environ.get("CHILD_SECONDS", "60")], close_fds=False)
if "CHILD_PID_FILE" in os.environ:
    with open(os.environ["CHILD_PID_FILE"], "a") as pids:
        pids.write(f"{_child.pid}\n")

__all__ = ["losses"]
