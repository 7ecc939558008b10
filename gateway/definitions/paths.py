"""Where the files of a definitions directory may live: inside it, once every link is resolved.

One rule for every file the gateway reads on a definition's behalf (YAML files, browser scripts): its real path
must lie inside the real definitions directory. Links inside it are fine (a Kubernetes ConfigMap mount is made
of them); a link out of it is refused. Besides containment, this keeps the watcher honest: it watches the real
directory, so a file outside would change without a reload.
"""

from __future__ import annotations

import os

MAX_LINKS = 40  # how many links Linux follows in one path before it gives up (ELOOP)


def real_inside(path: str | os.PathLike[str], real_root: str) -> str | None:
    """The real path of ``path`` when it lies inside ``real_root`` (itself a real path), else None."""
    real = os.path.realpath(path)
    return real if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep) else None


def outside_message(path: str | os.PathLike[str], consequence: str) -> str:
    return f"link leads outside the definitions directory (to {os.path.realpath(path)}): {consequence}"


def unfollowable_message(path: str | os.PathLike[str], root: str | os.PathLike[str], error: OSError,
                         consequence: str) -> str:
    """For a link the system cannot follow (ELOOP): the links it leads through, what to fix."""
    return f"link cannot be followed ({error.strerror}: {_link_chain(path, root)}): {consequence}"


def _link_chain(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """The links ``path`` leads through until one repeats (``a.yaml -> b.yaml -> a.yaml``), each shown below
    ``root``."""
    steps = [os.path.abspath(path)]
    while len(steps) <= MAX_LINKS and steps[-1] not in steps[:-1]:
        try:
            target = os.readlink(steps[-1])
        except OSError:  # not a link itself: the loop is in a directory on its way, which the message names
            break
        steps.append(os.path.normpath(os.path.join(os.path.dirname(steps[-1]), target)))
    top = os.path.abspath(root)
    return " -> ".join(os.path.relpath(step, top) if step.startswith(top + os.sep) else step for step in steps)
