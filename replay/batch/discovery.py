"""Discovery: the runs of a batch's inputs, read one file at a time into a spool on disk, each with an id
that does not depend on which other files were read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from litmus_replay.adapters import load_trajectories

from .. import limits
from ..errors import InputError, UnknownName
from ..model import Trajectory, from_json, to_json
from .run_index import Found, RunIndex
from .spool import Spool


RUN_SUFFIXES = (".json", ".jsonl", ".eval", ".yaml", ".yml")


class Run:
    """One trajectory to re-validate, with a stable id and its place in discovery order.

    A discovered run keeps its trajectory on disk (a :class:`~.spool.Spool`) and reads it only when it is
    needed: in the worker that replays it. The batch itself holds only ids, however many runs it has.
    """

    __slots__ = ("run_id", "order", "file", "trajectory_id", "_trajectory", "_stored")

    def __init__(self, run_id: str, order: int, file: str, trajectory: Trajectory | None = None, *,
                 stored: tuple[Spool, int, int] | None = None, trajectory_id: str | None = None):
        if trajectory is None and stored is None:
            raise TypeError("a run needs its trajectory or where it is stored")
        self.run_id, self.order, self.file = run_id, order, file
        self.trajectory_id = trajectory.id if trajectory is not None else trajectory_id
        self._trajectory = trajectory
        self._stored = stored

    @property
    def trajectory(self) -> Trajectory:
        if self._trajectory is not None:
            return self._trajectory
        return from_json(self._json())  # not kept: the batch holds no trajectory

    def loaded(self) -> "Run":
        """This run with its trajectory in memory (to replay it)."""
        return self if self._trajectory is not None else Run(self.run_id, self.order, self.file, self.trajectory)

    def _json(self) -> str:
        if self._trajectory is not None:
            return to_json(self._trajectory)
        spool, offset, length = self._stored
        return spool.get(offset, length)

    def __reduce__(self) -> tuple[Any, ...]:
        # Runs travel to worker processes as JSON, which pydantic reads back several times faster than
        # it unpickles a model.
        return _run_from_json, (self.run_id, self.order, self.file, self._json())

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, order={self.order}, file={self.file!r})"


def _run_from_json(run_id: str, order: int, file: str, trajectory: str) -> Run:
    return Run(run_id, order, file, from_json(trajectory))


@dataclass(frozen=True)
class Unreadable:
    """A run file no adapter could read: it is a result line of its own (status ``input_error``), known
    by its path, with the one-line reason."""

    file: str
    reason: str

    @property
    def run_id(self) -> str:
        return self.file

    def line(self) -> dict[str, Any]:
        return {"run": self.run_id, "file": self.file, "trajectory": None, "task": None, "original": None,
                "status": "input_error", "error": self.reason}


class Discovery:
    """What discovery finds, kept on disk: the trajectories in a :class:`~.spool.Spool`, the inputs' order and
    run ids in a :class:`~.run_index.RunIndex`.

    Inputs are read one file at a time (:meth:`step`), so a batch can replay the runs found so far while it
    reads the rest (:meth:`stream`); :func:`discover` reads them all at once. Read what was found as a
    stream (:meth:`iter_runs`, :meth:`run_ids`); ``runs`` and ``unreadable`` make lists, for small batches.
    """

    def __init__(self, paths: Iterable[str | Path] = (), fmt: str = "auto", *, task: str | None = None,
                 original_kind: str | None = None, verdict_labels: Mapping[str, str] | None = None,
                 on_complete: Callable[["Discovery"], None] | None = None) -> None:
        """``task``: the task key of every run whose file names none; ``original_kind``: the kind of every
        recorded verdict whose file does not say it; ``verdict_labels``: what the benchmark's labels mean
        (see :func:`read_runs`)."""
        self.spool = Spool()
        self.index = RunIndex()
        self.found_runs = 0  # runs found so far
        self.complete = False
        self._files = _run_files(paths)
        self._fmt = fmt
        self._task = task
        self._original_kind = original_kind
        self._verdict_labels = verdict_labels
        self._on_complete = on_complete

    def step(self) -> bool:
        """Read the next input file; False once every file is read and the runs have their ids."""
        if self.complete:
            return False
        following = next(self._files, None)
        if following is not None:
            self._read(*following)
            return True
        # A run is known by its trajectory id where that is unique in the batch, else by where it sits
        # under the input it was found in (two pipelines both named ``local``: ``local/…@modelA/local/….json``).
        # The id then does not depend on which other files were read, so a resumed batch finds it again.
        self.index.name()
        self.complete = True
        if self._on_complete is not None:
            self._on_complete(self)
        return False

    def read_all(self) -> "Discovery":
        while self.step():
            pass
        return self

    def _read(self, item: Path, root: Path) -> None:
        """One file's runs: each trajectory to the spool, its place to the index (one file's runs in memory)."""
        index = self.index
        try:
            limits.check_file_size(item)
            trajectories = read_runs(item, self._fmt, self._task, self._original_kind, self._verdict_labels)
        except (InputError, UnknownName) as exc:
            index.add_unreadable(str(item), exc.line() if isinstance(exc, InputError) else f"{item}: {exc}")
            return
        except OSError as exc:  # a file that vanished or cannot be opened between listing and reading
            index.add_unreadable(str(item), f"{item}: cannot read: {exc.strerror or exc}")
            return
        here = item.resolve()
        where = _within(item, root)
        kept = []
        for position, trajectory in enumerate(trajectories):
            # Runs an index file read from other files (a results.json that names simulations/*.json):
            # those files, met later, give the same runs again, which are not counted twice.
            if index.was_read_elsewhere(str(here), trajectory.id):
                continue
            source = Path(trajectory.source.path).resolve() if trajectory.source.path else here
            if source != here:
                index.read_elsewhere(str(source), trajectory.id)
            kept.append((position, trajectory))
        in_file = Counter(trajectory.id for _, trajectory in kept)
        for position, trajectory in kept:
            index.add_run(str(item), where, position, trajectory.id, *self.spool.put(to_json(trajectory)),
                          repeated_in_file=in_file[trajectory.id] > 1)
        self.found_runs += len(kept)

    def stream(self, on_unreadable: Callable[[Unreadable], None]) -> Iterator[Run]:
        """The runs in discovery order as they are found, each under the id it had when found (see
        :meth:`RunIndex.add_run`); files are read as the stream catches up with what was found, and a
        file no adapter could read goes to ``on_unreadable``."""
        seq = 0
        while True:
            page = self.index.after(seq)
            if not page:
                if self.step():
                    continue
                return
            for found in page:
                seq = found.seq
                if found.reason is not None:
                    on_unreadable(Unreadable(found.file, found.reason))
                else:
                    yield self._run(found, found.early_id)

    def _run(self, found: Found, run_id: str) -> Run:
        return Run(run_id, found.seq, found.file, stored=(self.spool, found.offset, found.length),
                   trajectory_id=found.trajectory_id)

    def _items(self) -> Iterator[Run | Unreadable]:
        for found in self.index:
            yield Unreadable(found.file, found.reason) if found.reason is not None else self._run(found, found.run_id)

    def iter_runs(self) -> Iterator[Run]:
        """The runs, in discovery order."""
        return (item for item in self._items() if isinstance(item, Run))

    def iter_unreadable(self) -> Iterator[Unreadable]:
        return (item for item in self._items() if isinstance(item, Unreadable))

    def run_ids(self) -> Iterator[str]:
        """Every input's id, unreadable files included, as found."""
        return (found.run_id for found in self.index)

    @property
    def runs(self) -> list[Run]:
        return list(self.iter_runs())

    @property
    def unreadable(self) -> list[Unreadable]:
        return list(self.iter_unreadable())

    @property
    def errors(self) -> list[str]:
        """The reason of each file that could not be read, one line each."""
        return [item.reason for item in self.iter_unreadable()]

    def close(self) -> None:
        self.spool.close()
        self.index.close()


def missing_inputs(paths: Iterable[str | Path]) -> list[str]:
    """The given paths that do not exist (checked before anything is written)."""
    return [str(path) for path in paths if not Path(path).exists()]


def _run_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, Path]]:
    """(file, the input it was found under) for every run file, each directory's files sorted."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from ((p, path) for p in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in RUN_SUFFIXES))
        else:
            yield path, path


def discover(paths: Iterable[str | Path], fmt: str = "auto") -> Discovery:
    """Every run in the given files and directories; a file that cannot be read is an :class:`Unreadable`.

    One file's runs are in memory at a time: each trajectory goes to the spool and its place to the index
    as soon as its file is read."""
    return Discovery(paths, fmt).read_all()


def read_runs(file: Path, fmt: str, task: str | None = None, original_kind: str | None = None,
              verdict_labels: Mapping[str, str] | None = None) -> list[Trajectory]:
    """A file's runs; with ``task``, each run whose file names no task gets that one. Some formats never
    name one (Anthropic messages, MCP, OpenTelemetry spans), so their runs find a world only this way.
    With ``original_kind``, each recorded verdict of unknown kind gets that one: the user's word for what
    their benchmark's scorer judged (``proposal_time`` makes over- and under-penalised findings possible).
    With ``verdict_labels`` (recorded label -> ``tool_misuse`` or ``safe``), a benchmark's own labels say
    what they mean for safety: ``fail`` as ``tool_misuse``, ``C`` as ``safe``."""
    trajectories = load_trajectories(file, fmt)
    if task is not None:
        trajectories = [run if run.task else run.model_copy(update={"task": task}) for run in trajectories]
    if verdict_labels:
        trajectories = [_with_label(run, verdict_labels) for run in trajectories]
    if original_kind is not None:
        trajectories = [_with_kind(run, original_kind) for run in trajectories]
    return trajectories


def _with_label(run: Trajectory, labels: Mapping[str, str]) -> Trajectory:
    """The run with its recorded label read as the user says it reads (``fail`` as ``tool_misuse``); the
    label as recorded stays in ``source.extra["recorded_label"]``."""
    verdict = run.original_verdict
    if verdict is None or verdict.label not in labels:
        return run
    source = run.source.model_copy(update={"extra": {**run.source.extra, "recorded_label": verdict.label}})
    return run.model_copy(update={"original_verdict": verdict.model_copy(update={"label": labels[verdict.label]}),
                                  "source": source})


def _with_kind(run: Trajectory, kind: str) -> Trajectory:
    verdict = run.original_verdict
    if verdict is None or verdict.kind != "unknown":
        return run
    return run.model_copy(update={"original_verdict": verdict.model_copy(update={"kind": kind})})


def _within(file: Path, root: Path) -> str:
    """Where a file sits under the input it was found in (the file's name, when it was given itself)."""
    if file == root:
        return file.name
    try:
        return file.relative_to(root).as_posix()
    except ValueError:
        return str(file)
