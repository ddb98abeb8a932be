//! reef-sandbox: The only place reef starts processes: a confined runner with timeouts, output caps, scrubbed environment and process-group kill.
