"""A MkDocs hook: every command of ``litmus-replay`` in the command reference, the lazily loaded ones too.

The command line imports some commands only when they run (``fidelity``, ``nearmiss``, ...), so its group's
``commands`` holds only the others until then, and mkdocs-click documents what ``commands`` holds. Before
the pages are read, this asks the group for every command it lists, which loads each one. Named in
``mkdocs.yml`` under ``hooks``.
"""

from __future__ import annotations

from typing import Any

import click


def on_config(config: Any) -> Any:
    from litmus_replay.replay.cli import main

    context = click.Context(main, info_name="litmus-replay")
    for name in main.list_commands(context):
        main.get_command(context, name)
    return config
