"""Building blocks every CPU forward may use (the lean torch forward, the int8 backend): per-row
int8 weights, a growing KV buffer, full-vocabulary logits from a reduced head. Tensors in,
tensors out; knows nothing about models, files or backends."""
