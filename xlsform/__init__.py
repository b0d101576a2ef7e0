"""XLSForm, the spreadsheet form of KoboToolbox, ODK and SurveyCTO, to an ldp-survey survey
file and back (the `xlsform` extra: pyxform, openpyxl, tomli-w). Imports `shared` only; the
CLI loads it on first use (`survey import`, `survey export-xlsform`)."""

from ldpsurvey.xlsform.reading import FormRefused, Imported, read_form
from ldpsurvey.xlsform.survey_file import survey_toml
from ldpsurvey.xlsform.writing import write_form

__all__ = ["FormRefused", "Imported", "read_form", "survey_toml", "write_form"]
