"""Several llama-servers for one app: endpoints, their clients, health and session placement."""
