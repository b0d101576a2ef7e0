"""The minimum cell size of analyses that use openly answered questions: no group of open
answers (a combination of levels of the categorical ones) held by 1 to min_cell - 1
respondents may shape a reported figure, so that open answers single no one out.

This is the usual threshold rule of statistical disclosure control (Hundepool et al. 2012,
Statistical Disclosure Control, section 5.2: a cell is sensitive when fewer than n
respondents contribute to it). It is checked on the finest partition an analysis uses: a
regression's groups together with the cells its weights are constant on, and for raking the
cells of all margins together, since raking weights are constant on those cells and a
single respondent alone in one (say the one man of a region) would otherwise be weighted to
carry a whole estimate.
"""

from collections.abc import Sequence

import pandas as pd

from ldpsurvey.analysis.errors import AnalysisError


def check_cells(frame: pd.DataFrame, columns: Sequence[str], counts: str | None,
                min_cell: int) -> None:
    """AnalysisError naming the first group of the categorical `columns` (a combination of
    their levels) held by 1 to min_cell - 1 respondents (rows, or the sum of `counts`).
    Numeric columns define no groups."""
    groups = [n for n in dict.fromkeys(columns)
              if not pd.api.types.is_numeric_dtype(frame[n])
              or isinstance(frame[n].dtype, pd.CategoricalDtype)]
    if not groups:
        return
    sizes = (frame.groupby(groups, observed=True)[counts].sum() if counts is not None
             else frame.groupby(groups, observed=True).size())
    small = sizes[(sizes > 0) & (sizes < min_cell)]
    if len(small):
        level = small.index[0] if len(groups) > 1 else (small.index[0],)
        where = ", ".join(f"{name} = {value}" for name, value in zip(groups, level, strict=True))
        raise AnalysisError(f"the group {where} has fewer than {min_cell} respondents: too few "
                            "to report without singling them out (merge levels or drop the "
                            "covariate)")
