"""`python -m ldpsurvey.cli` runs the ldp-survey command."""

from . import main

main()
