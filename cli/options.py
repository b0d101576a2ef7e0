"""Options that several commands share, defined once."""

import click

from ldpsurvey.shared import DEFAULT_CONFIDENCE, DEFAULT_METHOD, METHODS

json_option = click.option(
    "--json", "as_json", is_flag=True,
    help="Print one JSON document on stdout, with the API's field names (messages and prompts "
         "go to stderr; an error stays one line on stderr with a non-zero exit).")
confidence_option = click.option(
    "--confidence", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
    default=DEFAULT_CONFIDENCE, show_default=True, help="Confidence level of the interval.")
method_option = click.option(
    "--method", type=click.Choice(list(METHODS)), default=DEFAULT_METHOD, show_default=True,
    help="Confidence interval for the reported rate.")
