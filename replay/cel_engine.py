"""The CEL library, imported without its command line.

``cel/__init__`` imports ``cel.cli`` (typer, prompt_toolkit, pygments), which nothing here uses and which
costs every process that judges a call about 60 ms of CPU before its first run, the batch's own included.
An empty module stands in for ``cel.cli`` while the package imports; a later ``import cel.cli`` still gets
the real one.
"""

from __future__ import annotations

import sys
import types

if "cel" in sys.modules:
    import cel
else:
    _stand_in = types.ModuleType("cel.cli")
    sys.modules["cel.cli"] = _stand_in
    try:
        import cel
    finally:
        if sys.modules.get("cel.cli") is _stand_in:
            del sys.modules["cel.cli"]
        if getattr(sys.modules.get("cel"), "cli", None) is _stand_in:
            del sys.modules["cel"].cli

__all__ = ["cel"]
