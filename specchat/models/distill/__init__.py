"""Self-distillation of a small draft for a target (`specchat distill`).

teacher.py generates the target's answers and top-k logits; draft.py builds a
draft from target layers and saves its own part; train.py trains it;
assemble.py rebuilds a full transformers folder from a shipped draft; run.py
ties the steps together for the command.
"""
