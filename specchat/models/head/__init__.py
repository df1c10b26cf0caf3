"""A draft head that reads its target's hidden states (EAGLE): its network, its file, and
its run time behind the engine's `DraftHead` protocol."""
