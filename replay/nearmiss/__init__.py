"""Near-miss generation: plausible mutations of a scenario's trajectory that sit one step from the decision
boundary — a pair class or a finding flips, or one more change would flip it — shrunk to their minimal
change and written as scenarios ``litmus-replay check`` replays.

Modules: :mod:`.plausible` (what a model could have produced), :mod:`.draft` (a trajectory being mutated,
an edit as data), :mod:`.operators` and :mod:`.domain_operators` (the mutations), :mod:`.seed` (the run
a search starts from), :mod:`.verdict` (what a mutant flips), :mod:`.search` (try, keep, shrink, dedupe),
:mod:`.writer` (scenario files), :mod:`.summary` (what a suite covers), :mod:`.command` (the CLI).
"""

from .command import generate
from .draft import Draft, Edit
from .operators import OPERATORS
from .plausible import Seen, is_plausible
from .search import Mutant, Search
from .seed import Seed, SeedReplayer, seed_from_task_world, seeds_from_scenario
from .verdict import Flip, Verdict, flips

__all__ = [
    "Draft",
    "Edit",
    "Flip",
    "Mutant",
    "OPERATORS",
    "Search",
    "Seed",
    "SeedReplayer",
    "Seen",
    "Verdict",
    "flips",
    "generate",
    "is_plausible",
    "seed_from_task_world",
    "seeds_from_scenario",
]
