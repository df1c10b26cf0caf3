"""Configuration and model references: models.toml's pairs, what a reference names and
where its files are built in the user cache. Loads no model.
"""
