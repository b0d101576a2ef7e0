"""gunicorn settings for running the aggregator in production.

    LDP_SURVEY_KEY_FILE=/etc/ldp-survey/signing-key.pem LDP_SURVEY_SECRET_KEY=... \
    LDP_SURVEY_STORAGE_KEY=... LDP_SURVEY_PUBLIC_URL=https://survey.example.org \
    LDP_SURVEY_DATABASE_URL=postgresql://... gunicorn -c deploy/gunicorn.conf.py

The app refuses to start without the key file and secret (every replica must serve the same
signing key). The access log holds method, path without query string, status, size and
duration: no client address, no query string, no user agent, no referrer; and no line at all
for the responses endpoints (journald would time-stamp each, in arrival order). The error log
holds no client address either (gunicorn names one when it refuses a malformed request).
"""

# The settings live in the installed package, where `ldp-survey serve --public` finds them too.
from ldpsurvey.aggregator.web.gunicorn import *  # noqa: F403
