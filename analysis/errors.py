"""The analyses' two failures: input that cannot be analysed as asked, and a fit that does
not converge. Both say why in their message, which the CLI prints as its one line and the
API returns as its 4xx detail."""


class AnalysisError(ValueError):
    """The formula, the data, the margins or the file cannot be analysed as asked."""


class ConvergenceError(RuntimeError):
    """An iterative fit (the regression's likelihood, the raking) found no solution: the
    message names the likely cause."""
