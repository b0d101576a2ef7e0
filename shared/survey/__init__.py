"""The survey format: the definition a researcher writes, the manifest the aggregator signs, and
the checks a survey passes before it is published."""
