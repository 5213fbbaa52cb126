"""ipywidgets controls for the notebooks: pick a problem's sizes, see mistakes explained.

The picker is the first cell of each problem notebook; later cells read
``picker.sizes``. A bad value never raises inside a widget callback: the message appears
under the inputs, and ``picker.sizes`` keeps the last valid sizes.
"""

from __future__ import annotations

import ipywidgets as w

from fusedkit.problems import Problem, SizeError, Sizes


class SizePicker:
    """One integer box per dimension of ``problem``, defaulting to KernelBench's sizes."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self._valid: Sizes = dict(problem.defaults)
        style = {"description_width": "110px"}
        self.boxes = {d.name: w.IntText(value=d.default, description=d.name, style=style,
                                        tooltip=d.description,
                                        layout=w.Layout(width="260px"))
                      for d in problem.dims}
        self.message = w.HTML()
        self.reset = w.Button(description="KernelBench sizes", icon="undo",
                              tooltip="restore the default sizes")
        self.reset.on_click(lambda _: self.set_sizes(problem.defaults))
        for box in self.boxes.values():
            box.observe(self._changed, names="value")
        hints = "".join(f"<li><code>{d.name}</code>: {d.description}, default {d.default}, "
                        f"1 to {d.maximum}</li>" for d in problem.dims)
        self.widget = w.VBox([
            w.HTML(f"<b>Sizes for {problem.key}: {problem.title}</b><ul>{hints}</ul>"),
            w.HBox(list(self.boxes.values())[:2]),
            w.HBox(list(self.boxes.values())[2:] + [self.reset]),
            self.message,
        ])
        self._changed()

    def _changed(self, _change: object = None) -> None:
        raw = {name: box.value for name, box in self.boxes.items()}
        try:
            self._valid = self.problem.sizes(raw)
        except SizeError as e:
            self.message.value = f"<span style='color:#b00'>⚠ {e}. Still using the last valid sizes.</span>"
            return
        self.message.value = ("<span style='color:#070'>✓ sizes accepted; re-run the cells "
                              "below to use them.</span>")

    def set_sizes(self, sizes: Sizes) -> None:
        """Set the boxes (validated first: a bad value raises SizeError here)."""
        sizes = self.problem.sizes(sizes)
        for name, value in sizes.items():
            self.boxes[name].value = value

    @property
    def sizes(self) -> Sizes:
        """The last valid sizes the boxes held."""
        return dict(self._valid)

    @property
    def error(self) -> str:
        """The current problem with the boxes' values, or "" when they are valid."""
        try:
            self.problem.sizes({n: b.value for n, b in self.boxes.items()})
        except SizeError as e:
            return str(e)
        return ""

    def _ipython_display_(self) -> None:
        from IPython.display import display  # noqa: PLC0415

        display(self.widget)
