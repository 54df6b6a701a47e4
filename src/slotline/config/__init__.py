"""Configuration: slotline.yaml, agent types and their templates, what a node publishes."""
