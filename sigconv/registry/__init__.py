"""The registry of convolution implementations: variants, the auto choice, tuning."""
