"""`python -m ldpsurvey.cli` runs the ldp-survey command."""

from ldpsurvey.cli import main

main()
