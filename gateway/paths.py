"""Where the files of a definitions directory may live: inside it, once every link is resolved.

One rule for every file the gateway reads on a definition's behalf (YAML files, browser scripts): its real path
must lie inside the real definitions directory. Links inside it are fine (a Kubernetes ConfigMap mount is made
of them); a link out of it is refused. Besides containment, this keeps the watcher honest: it watches the real
directory, so a file outside would change without a reload.
"""

from __future__ import annotations

import os


def real_inside(path: str | os.PathLike[str], real_root: str) -> str | None:
    """The real path of ``path`` when it lies inside ``real_root`` (itself a real path), else None."""
    real = os.path.realpath(path)
    return real if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep) else None


def outside_message(path: str | os.PathLike[str], consequence: str) -> str:
    return f"link leads outside the definitions directory (to {os.path.realpath(path)}): {consequence}"
