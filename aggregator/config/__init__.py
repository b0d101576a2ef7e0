"""What the aggregator is configured with: settings, the instance folder, its signing key, random ids."""
