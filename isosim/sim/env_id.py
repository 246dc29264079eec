"""The gymnasium id of the isosim environment (a module of its own so that registering it on
``import isosim`` does not import the environment's code)."""

ENV_ID = "isosim/Bandit-v0"
