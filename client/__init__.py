"""The respondent client: randomizes on the device and sends only randomized answers."""
