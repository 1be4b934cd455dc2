"""The panel's copy counts as toggle buttons, every count in sight.

    >>> CopyToggles([1, 2, 4], chosen=[1, 4]).value
    (1, 4)
"""

from __future__ import annotations

from typing import Sequence

import ipywidgets as w

__all__ = ["CopyToggles"]


class CopyToggles:
    """The copy counts as a row of toggle buttons, all in sight, with a hint; `value` is the chosen counts, as a
    SelectMultiple's would be.

    >>> toggles = CopyToggles([1, 2, 4, 7], chosen=[2])
    >>> toggles.value = (2, 7); toggles.value
    (2, 7)
    """

    def __init__(self, counts: Sequence[int], chosen: Sequence[int]):
        self.buttons = {n: w.ToggleButton(value=n in chosen, description=str(n), tooltip=f"{n} copies at once",
                                          layout=w.Layout(width="42px")) for n in counts}
        hint = w.HTML("<small>copies: click each count to run it (1 = the job alone, the base of every gain)</small>")
        self.widget = w.VBox([hint, w.HBox(list(self.buttons.values()))])

    @property
    def value(self) -> tuple[int, ...]:
        """The chosen copy counts, smallest first."""
        return tuple(n for n, button in self.buttons.items() if button.value)

    @value.setter
    def value(self, counts: Sequence[int]) -> None:
        """Choose `counts` (the toggles of the others go off)."""
        for n, button in self.buttons.items():
            button.value = n in counts
