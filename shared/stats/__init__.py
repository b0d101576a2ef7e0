"""The statistics: the forced-response design, estimators, intervals, likelihood, planning,
posterior bounds and shuffling, standard library only."""
