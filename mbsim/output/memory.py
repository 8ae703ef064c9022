"""The in-memory sink of a run's rows (the Python API's ``sim.run()`` without ``file=``).

It takes the rows exactly as mbsim.output.hdf5.ResultWriter does (the run loop of
mbsim.simulate writes to either) and gives them back as arrays under the dataset paths of the
result file (CONTRACT §3): ``bodies/{body}/position`` is split into ``bodies/NAME/position``,
one per body, with names escaped as the file escapes them (mbsim.names.hdf5_name).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.diagnostics import placeholder_names
from mbsim.model.model import Model
from mbsim.names import hdf5_name


class RowCollector:
    """Rows of a run held in memory; :meth:`arrays` gives them by dataset path after the run.

    Attributes:
        attrs: the root attributes the file would have (scene_name, method, integrator,
            dimension, status, message, steps, ...).
        names: the column names of ``q`` and ``v`` (the file's ``names`` attributes).
        events: (times, kinds, contacts) of an event_driven run, else None.
    """

    def __init__(
        self,
        model: Model,
        attrs: dict[str, Any],
        coordinates: tuple[list[str], list[str]] | None = None,
        columns: list[tuple[str, tuple[int, ...]]] | None = None,
    ) -> None:
        qn, vn = coordinates if coordinates is not None else model.coordinate_names()
        self.names = {"q": list(qn), "v": list(vn)}
        self.attrs: dict[str, Any] = {"dimension": model.dimension, **attrs, "status": "running", "message": ""}
        self.scene_text = model.scene_text
        self.events: tuple[np.ndarray, list[str], list[str]] | None = None
        self.rows = 0
        self.failure: str | None = None  # memory always takes the rows
        self._placeholders = placeholder_names(model)
        self._blocks: dict[str, list[np.ndarray]] = {}
        # the datasets every row has, with zero rows until the first (as the file's header has them)
        self._shapes = {key: shape for key, shape in (columns or ())}
        for key, shape in (("time", ()), ("q", (len(qn),)), ("v", (len(vn),))):
            self._shapes.setdefault(key, shape)

    def append(self, row: dict[str, np.ndarray | float]) -> None:
        """One row: key -> value of one time step."""
        self.append_rows({key: np.asarray(value, dtype=float)[None] for key, value in row.items()})

    def append_rows(self, rows: dict[str, np.ndarray]) -> None:
        """A block of rows: key -> array (n, ...) over n time steps (copied)."""
        n = 0
        for key, block in rows.items():
            block = np.array(block, dtype=float)
            self._blocks.setdefault(key, []).append(block)
            self._shapes.setdefault(key, block.shape[1:])
            n = len(block)
        self.rows += n

    def set_attrs(self, **attrs: Any) -> None:
        self.attrs.update(attrs)

    def write_events(self, times: np.ndarray, kinds: list[str], contacts: list[str]) -> None:
        self.events = (np.asarray(times, dtype=float), list(kinds), list(contacts))

    def flush(self) -> None:
        """Nothing to flush: the rows are in memory."""

    def write_group(self, name: str, datasets: dict[str, np.ndarray], attrs: dict[str, Any]) -> bool:
        """Not kept: /restart is what ``mbsim run --from`` reads from a file; in memory a run goes
        on with ``sim.run(start=sim.state)``."""
        return False

    def close(self, status: str, message: str, **attrs: Any) -> tuple[str, str]:
        self.attrs.update(attrs, status=status, message=message)
        return status, message

    def arrays(self) -> dict[str, np.ndarray]:
        """Every recorded quantity by its dataset path in the result file: (n, ...) arrays."""
        out: dict[str, np.ndarray] = {}
        for key, shape in self._shapes.items():
            blocks = self._blocks.get(key)
            data = np.concatenate(blocks) if blocks else np.zeros((0, *shape))
            # a placeholder stands first after the group (as ResultWriter._targets reads it)
            group, _, rest = key.partition("/")
            placeholder = rest.partition("/")[0]
            names = self._placeholders.get((group, placeholder))
            targets = [(key, data)] if names is None else [
                (key.replace(placeholder, hdf5_name(name), 1), data[:, k]) for k, name in enumerate(names)
            ]  # fmt: skip
            for path, values in targets:
                # the file has no dataset of empty rows either (but /q and /v, made with its header)
                if values.ndim < 2 or values.shape[1] or path in ("q", "v"):
                    out[path] = values
        return out
