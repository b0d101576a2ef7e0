"""The services: the rules of surveys, intake, releases, exports and analyses, as plain functions
over a connection; they raise `ldpsurvey.aggregator.exceptions` and know nothing of HTTP."""
