"""Time-to-accuracy tasks (`paralab converge --task`), one module each defining `TASK` (see `base.py`)."""
from .base import ENV, KINDS, Task, get_task, register, task_infos, task_names, unregister

__all__ = ["Task", "KINDS", "ENV", "get_task", "register", "unregister", "task_infos", "task_names"]
