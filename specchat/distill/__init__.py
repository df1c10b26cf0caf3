"""Self-distillation of a small draft for a target (`specchat distill`).

teacher.py generates the target's answers and top-k logits; draft.py picks the
target layers a draft starts from, grows it and saves its own part; train.py
trains it; run.py ties the steps together for the command. The shipped format,
and rebuilding a full transformers folder from it, are
specchat.models.torch_backend.shipped_draft's: loading a draft needs no training code.
Uses specchat.models; models never imports this package.
"""
